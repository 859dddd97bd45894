"""The plausible range of every number sizing accepts (docs/contract.md §3 "Ranges"; README "Input ranges").

A number outside its range is a SizingInputError naming the field, so one request can neither ask
for absurd work nor reach float corners (a rate of 1e-320 makes 1 ÷ rate overflow to infinity, a
utilization of 1e-320 makes replicas infinite). The bounds are generous: the largest real services
are orders of magnitude inside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from capacity.input_errors import SizingInputError


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    unit: str
    # A rate may be exactly 0 (no traffic) although its positive values start at `low`.
    zero_ok: bool = False

    def describe(self) -> str:
        zero = "0 or " if self.zero_ok else ""
        unit = f" {self.unit}" if self.unit else ""
        return f"{zero}{self.low:,g} to {self.high:,g}{unit}"


MAX_TOKENS = 10_000_000  # per request: 60× the longest context in the catalogue
MAX_SIM_REQUESTS = 200_000  # requests one KV simulation replays; larger traces are sampled down to this

RANGES: dict[str, Range] = {
    "arrival_rate_rps": Range(1e-6, 100_000, "requests/s", zero_ok=True),
    "tokens": Range(1, MAX_TOKENS, "tokens per request (mean, p50, p95, p99)"),
    "token_samples": Range(0, MAX_TOKENS, "tokens per sample"),
    "slo.ttft_p99_s": Range(0.001, 3600, "s"),
    "slo.tpot_p99_s": Range(0.0001, 60, "s"),
    "cache_hit_ratio": Range(0, 1, ""),
    "cancellation_ratio": Range(0, 1, ""),
    "utilization_target": Range(0.05, 1, ""),
    "lb_unevenness": Range(1, 10, "busiest replica ÷ average"),
    "startup_minutes": Range(0, 1440, "min"),
    "ramp_rps_per_minute": Range(0, 100_000, "requests/s per minute"),
    "zones": Range(1, 64, "zones"),
    "failure_policy.replica": Range(0, 10_000, "replicas"),
    "sim_requests": Range(1, MAX_SIM_REQUESTS, "requests"),
    "cost.electricity_per_kwh": Range(0, 10, "USD/kWh"),
    "cost.pue": Range(1, 5, ""),
    "cost.idle_power_share": Range(0, 1, ""),
    "cost.network_per_gb": Range(0, 100, "USD/GB"),
    "cost.slo_met_fraction": Range(0.01, 1, ""),
    "cost.retry_waste_fraction": Range(0, 0.99, ""),
    "prefill_mfu": Range(0.01, 1, ""),
    "target_throttled_share": Range(0.0001, 0.5, "share of requests throttled by the bucket"),
    "minute_rate_cv": Range(0, 5, "coefficient of variation of the one-minute rate"),
    "realisations": Range(32, 256, "independent draws of a stated envelope"),
    "realisation_quantile": Range(0.5, 0.999, "share of draws the answer must hold on"),
}


def in_range(field: str, value: object, key: str | None = None) -> float:
    """`value` as a float if it is a finite number inside RANGES[key or field]; else SizingInputError(field)."""
    r = RANGES[key or field]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SizingInputError(field, f"must be a finite number, {r.describe()} (got {value!r})")
    v = float(value)
    if (r.zero_ok and v == 0) or r.low <= v <= r.high:
        return v
    raise SizingInputError(field, f"must be {r.describe()} (got {value!r})")


def range_table() -> list[tuple[str, str]]:
    """(field, range) rows for the README and the calculator page."""
    return [(name, r.describe()) for name, r in RANGES.items()]
