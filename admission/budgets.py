"""A scope's period budgets and request rate (issue 23), from the snapshot to the store's keys.

No Django here: the web tier (admission.params from the database) and the library mode (from the
portal's snapshot JSON) both hold a `LimitSpec` per scope and build the store's `Limits` the same way.

Several active entitlements in one scope add up, as their rates do: budgets of the same unit sum,
and so do request rates and bursts. An entitlement without a budget adds nothing to the scope's
budget (it never lifts a cap another entitlement set); the first budgeted entitlement (by pk)
names the unit and the time zone, and a budget in another unit is not added to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from admission.backends.base import Bucket, Limits, Period, budget_units, periods_at
from capacity.periods import DAILY, MONTHLY, WT

__all__ = [
    "LimitSpec", "combine", "keys_around", "limits_for", "spec_of", "units_of", "period_key", "rps_key", "zero_budget",
]  # fmt: skip


@dataclass(frozen=True)
class LimitSpec:
    unit: str = WT
    tz: str = "UTC"
    daily: float | None = None
    monthly: float | None = None
    max_rps: float | None = None
    burst: float | None = None

    @property
    def any(self) -> bool:
        return self.daily is not None or self.monthly is not None or self.max_rps is not None


def spec_of(values: dict[str, Any]) -> LimitSpec | None:
    """One entitlement's limits (the entitlement fields, as in the snapshot JSON); None: no limit."""
    spec = LimitSpec(
        unit=values.get("budget_unit") or WT, tz=values.get("budget_tz") or "UTC",
        daily=_f(values.get("daily_budget")), monthly=_f(values.get("monthly_budget")),
        max_rps=_f(values.get("max_rps")), burst=_f(values.get("burst")),
    )  # fmt: skip
    if spec.max_rps is not None and spec.burst is None:
        spec = LimitSpec(spec.unit, spec.tz, spec.daily, spec.monthly, spec.max_rps, max(1.0, spec.max_rps))
    return spec if spec.any else None


def combine(a: LimitSpec | None, b: LimitSpec | None) -> LimitSpec | None:
    """Two entitlements of one scope (see the module's docstring)."""
    if a is None or b is None:
        return a or b
    a_budgeted = a.daily is not None or a.monthly is not None
    take = not a_budgeted or a.unit == b.unit  # b's budgets count in a's unit, or a has none
    return LimitSpec(
        a.unit if a_budgeted else b.unit,
        a.tz if a_budgeted else b.tz,
        _add(a.daily, b.daily if take else None),
        _add(a.monthly, b.monthly if take else None),
        _add(a.max_rps, b.max_rps),
        _add(a.burst, b.burst),
    )


def period_key(prefix: str, scope_key: str, kind: str) -> str:
    """A period bucket's key stem; the store appends ':<period id>'. Named like the scope's other
    keys (prefix, a short kind, the scope key), so they move together under one hash tag."""
    return f"{prefix}bd:{scope_key}:{'d' if kind == DAILY else 'm'}"


def rps_key(prefix: str, scope_key: str) -> str:
    return f"{prefix}rq:{scope_key}"


def limits_for(spec: LimitSpec | None, prefix: str, scope_key: str) -> Limits | None:
    """The store's half: keys, limits and the request bucket (rate max_rps, depth burst)."""
    if spec is None:
        return None
    periods = tuple(
        Period(kind, period_key(prefix, scope_key, kind), limit)
        for kind, limit in ((DAILY, spec.daily), (MONTHLY, spec.monthly))
        if limit is not None
    )
    rps = None
    if spec.max_rps is not None:
        rps = Bucket(rps_key(prefix, scope_key), spec.max_rps, spec.burst or max(1.0, spec.max_rps))
    return Limits(spec.unit, spec.tz, periods, rps)


def keys_around(scope_limits: Limits | None, t: float) -> list[str]:
    """Every period key a reservation made at epoch `t` (a signed id's expiry minus its TTL) may
    have been charged to: its period's and both neighbours' (the store's clock picked one), so a
    complete can pass them in KEYS (Redis Cluster) without the record. Empty without budgets."""
    if scope_limits is None:
        return []
    return [
        f"{per.key}:{pid}" for per in scope_limits.periods for pid, _, _ in periods_at(per.kind, scope_limits.tz, t)
    ]


def units_of(scope_limits: Limits | None, wt: float, prompt_tokens: int, output_tokens: int) -> float:
    """A reserve's estimate in its budget's unit (0 without budgets)."""
    if scope_limits is None:
        return 0.0
    return budget_units(scope_limits.unit, wt, prompt_tokens, output_tokens)


def zero_budget(scope_limits: Limits | None) -> str | None:
    """The period ("daily", "monthly") whose budget is 0, if any: every request with tokens is refused
    (an Atlas limit of 0 blocks its key) and no retry will pass, so a refusal must not name a time to
    retry at (the period's end would advise waiting for a reset that changes nothing)."""
    if scope_limits is None:
        return None
    return next((per.kind for per in scope_limits.periods if per.limit <= 0), None)


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _add(x: float | None, y: float | None) -> float | None:
    if x is None:
        return y
    return x if y is None else x + y
