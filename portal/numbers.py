"""One number format for every page (issue 22): thousands separators, a unit, the same decimals per unit.

Pages print numbers through the `numbers` template filters (portal/templatetags/numbers.py), which call
`fmt` here. A value outside its unit's plausible range is never printed as a long integer: it comes back
flagged, in scientific notation, so the template can show a warning beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from capacity.daycost import DayCost
from capacity.sizing_result import SizingResult
from capacity.steps import Step, num

DASH = "—"


@dataclass(frozen=True)
class Unit:
    label: str  # printed after the number ("" for none)
    decimals: int
    limit: float  # |value| above this is implausible for the unit
    prefix: str = ""  # printed before the number ("$")
    scaled: bool = False  # K / M / B / T instead of long digit runs (token counts)


UNITS: dict[str, Unit] = {
    "": Unit("", 0, 1e15),
    "cu": Unit("CU", 1, 1e7),
    "cu_h": Unit("CU-h", 1, 1e10),
    "wt/s": Unit("wt/s", 0, 1e10),
    "wt": Unit("wt", 0, 1e16, scaled=True),
    "req/s": Unit("req/s", 2, 1e7),
    "requests": Unit("requests", 0, 1e13),
    "tokens": Unit("tokens", 0, 1e16, scaled=True),
    "usd": Unit("", 2, 1e10, prefix="$"),
    "usd/M": Unit("per M tokens", 4, 1e6, prefix="$"),
    "ms": Unit("ms", 0, 1e7),
    "s": Unit("s", 1, 1e9),
    "%": Unit("%", 1, 1e4),
    "replicas": Unit("replicas", 0, 1e6),
    "share": Unit("", 3, 1e3),
}

# Token counts read as 1.15 B rather than 1,153,156,278.
_SCALES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


def as_float(value: Any) -> float | None:
    """The value as a float, or None when it is empty or not a number."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else math.nan
    try:
        return float(Decimal(str(value).replace(",", "").strip()))
    except (InvalidOperation, ValueError):
        return None


@dataclass(frozen=True)
class Formatted:
    text: str
    implausible: bool = False
    why: str = ""


def _grouped(x: float | Decimal, decimals: int) -> str:
    text = f"{x:,.{decimals}f}"
    # -0.0 rounds to "-0": print it as zero.
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def _scaled(x: float) -> str:
    for factor, suffix in _SCALES:
        if abs(x) >= factor:
            v = x / factor
            return f"{_grouped(v, 2 if abs(v) < 10 else 1 if abs(v) < 100 else 0)} {suffix}"
    return _grouped(x, 0)


def _scientific(x: float) -> str:
    if not math.isfinite(x):
        return "not a number" if math.isnan(x) else ("∞" if x > 0 else "−∞")
    exp = math.floor(math.log10(abs(x))) if x else 0
    return f"{x / 10**exp:.2f}×10^{exp}"


def fmt(value: Any, unit: str = "", decimals: int | None = None) -> Formatted:
    """`value` in `unit` (a key of UNITS), with separators; `decimals` overrides the unit's."""
    u = UNITS[unit]
    x = as_float(value)
    if x is None:
        return Formatted(DASH if value in (None, "") else str(value))
    sep = " " if u.label else ""
    if not math.isfinite(x) or abs(x) > u.limit:
        why = f"outside the plausible range for {u.label or 'this figure'} (up to {_grouped(u.limit, 0)})"
        return Formatted(f"{u.prefix}{_scientific(x)}{sep}{u.label}", implausible=True, why=why)
    places = u.decimals if decimals is None else decimals
    body = _scaled(x) if u.scaled else _grouped(x, places)
    if u.prefix and body.startswith("-"):
        return Formatted(f"-{u.prefix}{body[1:]}{sep}{u.label}")
    return Formatted(f"{u.prefix}{body}{sep}{u.label}")


# The sizing calculator writes its figures as its step formulas do (capacity.steps.num), so the
# headline and the working beside it match digit for digit.


def sizing_figures(result: SizingResult, day: DayCost, rate: float) -> dict[str, str]:
    """The calculator's headline numbers, in `num`."""
    op = result.operating_point_used

    def opt(x: float | None) -> str:
        return "none" if x is None else f"{num(x)} s"

    return {
        "capacity_units": num(result.capacity_units),
        "mean_concurrency": num(result.mean_concurrency),
        "kv_tokens_p99": num(result.kv_tokens_p99),
        "kv_gb_p99": num(result.kv_bytes_p99 / 1e9),
        "kv_capacity": num(result.kv_capacity_tokens_per_replica),
        "sim_requests": f"{result.kv.requests:,}",
        "per_hour": num(result.cost.per_hour.value),
        "per_million": num(result.cost.per_million_useful_output_tokens.value),
        "marginal": num(result.cost.marginal_per_million_output_tokens.value),
        "out_tps": num(op.out_tps_per_replica),
        "ttft": num(result.ttft_s),
        "tpot": num(result.tpot_s),
        "ttft_limit": opt(op.ttft_limit_s),
        "tpot_limit": opt(op.tpot_limit_s),
        "ref_prompt": num(op.ref_mix.mean_prompt),
        "ref_output": num(op.ref_mix.mean_output),
        "rate": num(rate),
        "day_cost": num(day.cost_per_day.value),
        "day_per_million": num(day.per_million_useful_output_tokens.value),
    }


def step_rows(steps: Iterable[Step]) -> list[dict[str, str]]:
    """Each step of the working as the page lists it."""
    return [{"name": s.name, "value": num(s.value), "unit": s.unit, "formula": s.formula} for s in steps]


def num_pairs(values: dict[str, float]) -> list[tuple[str, str]]:
    """(key, `num`(value)) in the dict's order: the calculator's cost per planning basis."""
    return [(k, num(v)) for k, v in values.items()]


def plain(value: float | Decimal, unit: str = "") -> str:
    """`value` with separators at `unit`'s decimals, without the unit: for text that writes the unit itself
    ("12.5 CU for …"). A Decimal is rounded as it is, not through a float."""
    return _grouped(value, UNITS[unit].decimals)
