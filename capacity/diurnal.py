"""Size a request class for each hour of a day and cost the day (see daycost for the rules)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from capacity.daycost import HOURS, DayCost, HourDemand, day_cost
from capacity.input_errors import SizingInputError
from capacity.sizing import SizingInput, SizingResult, size


def hourly_rates(
    base_rps: float, *, hourly_multipliers: Sequence[float] | None, hourly_rps: Sequence[float] | None
) -> list[float]:
    """24 arrival rates from either multipliers of `base_rps` or rates given outright."""
    if (hourly_multipliers is None) == (hourly_rps is None):
        raise SizingInputError("hourly", "give exactly one of hourly_multipliers or hourly_rps")
    name, values = (
        ("hourly_multipliers", hourly_multipliers) if hourly_multipliers is not None else ("hourly_rps", hourly_rps)
    )
    assert values is not None
    if len(values) != HOURS:
        raise SizingInputError(name, f"needs {HOURS} values, got {len(values)}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise SizingInputError(f"{name}[{i}]", f"must be a finite number ≥ 0 (got {v!r})")
    return [base_rps * float(v) for v in values] if hourly_multipliers is not None else [float(v) for v in values]


def size_day(
    inp: SizingInput,
    *,
    hourly_multipliers: Sequence[float] | None = None,
    hourly_rps: Sequence[float] | None = None,
    floor_replicas: int | None = None,
    sim_requests: int = 5_000,
) -> tuple[DayCost, SizingResult]:
    """Each hour sized at its own rate (same seed, so hours are comparable); returns the day's
    cost and the peak hour's sizing. `floor_replicas` defaults to the peak hour's failure and
    startup reserve, which stays provisioned at night. The hours are sized `fleet_only` (no CU to
    buy, no peak's extra cost: the day reads only replicas and load), so the peak's result has none."""
    rates = hourly_rates(inp.arrival_rate_rps, hourly_multipliers=hourly_multipliers, hourly_rps=hourly_rps)
    # The peak hour picks the operating point (the pool's replica shape); the other hours scale
    # replicas of that shape: a pool does not change accelerator type by the hour.
    peak = size(replace(inp, arrival_rate_rps=max(rates), sim_requests=sim_requests), fleet_only=True)
    pinned = replace(inp, operating_points=(peak.operating_point_used,), accelerator=None, sim_requests=sim_requests)
    by_rate: dict[float, SizingResult] = {max(rates): peak}
    for rate in rates:
        if rate not in by_rate:
            by_rate[rate] = size(replace(pinned, arrival_rate_rps=rate), fleet_only=True)
    floor = peak.replicas.total - peak.replicas.steady if floor_replicas is None else floor_replicas
    acc = next(a for a in inp.accelerators if a.slug == peak.accelerator)
    hours = [
        HourDemand(
            hour=h,
            arrival_rate_rps=rate,
            replicas_needed=by_rate[rate].replicas.total,
            demand_wt_per_s=by_rate[rate].demand_wt_per_s,
            output_tokens_per_s=by_rate[rate].output_tokens_per_s,
            network_bytes_per_s=by_rate[rate].network_bytes_per_s,
        )
        for h, rate in enumerate(rates)
    ]
    day = day_cost(
        hours,
        accelerator=acc.cost,
        inputs=acc.cost_inputs or inp.cost_inputs,
        accelerators_per_replica=peak.operating_point_used.accelerators_per_replica,
        chips_per_slice=acc.chips_per_slice,
        goodput_wt_per_replica=peak.goodput_wt_per_s_per_replica,
        floor_replicas=floor,
    )
    return day, peak
