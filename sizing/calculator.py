"""What the calculator page sizes beyond the API's answer: the class's day, and the same class sized for
each planning basis of its trace. Both start from the one parse (sizing.parsing.prepare_sizing), so the
page and `POST /api/v1/sizing` cannot disagree on the inputs.

Each figure is computed once (issue 35.4): the CU to buy only for the class itself (the day's hours and
the other bases read the fleet and its cost alone), and the class's KV replays shared with its sizing at
each basis — a trace at its own timing replays the same at any rate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from capacity.daycost import DayCost
from capacity.diurnal import size_day
from capacity.input_errors import SizingInputError
from capacity.rate_basis import BASES
from capacity.sizing import KvReplays, size
from capacity.sizing_result import SizingResult
from sizing.parsing import PreparedSizing, prepare_sizing

DAY_SIM_REQUESTS = 4_000  # per hour; the day chart needs replica counts, not a fine KV tail


def size_prepared_day(prepared: PreparedSizing, *, hourly_multipliers: Sequence[float]) -> DayCost:
    """The class through a day of hourly multipliers of its rate (a trace's arrival times left out:
    each hour is sized at its own rate). Raises SizingInputError as `size_day` does."""
    inp = prepared.inp
    day_input = replace(inp, arrival_times_s=None) if inp.arrival_times_s is not None else inp
    day, _ = size_day(day_input, hourly_multipliers=hourly_multipliers, sim_requests=DAY_SIM_REQUESTS)
    return day


def cost_per_basis(
    prepared: PreparedSizing, result: SizingResult, replays: KvReplays | None = None
) -> dict[str, float]:
    """Cost per hour were the class sized for each basis of its trace's one-minute rates (same inputs
    otherwise; a basis the inputs cannot be sized at is left out), plus "explicit" last when the rate
    was stated rather than chosen. `result` is the sizing already done at `prepared.basis`, with
    `replays` (its KV replays, reused where the rate does not change them)."""
    rates = prepared.minute_rates
    if rates is None:
        return {}
    costs: dict[str, float] = {}
    for basis in BASES:
        if basis == prepared.basis:
            costs[basis] = result.cost.per_hour.value
            continue
        try:
            basis_inp = replace(prepared.inp, arrival_rate_rps=rates.rate(basis))
            costs[basis] = size(basis_inp, fleet_only=True, replays=replays).cost.per_hour.value
        except SizingInputError:
            continue
    if prepared.basis not in BASES:
        costs["explicit"] = result.cost.per_hour.value
    return costs


@dataclass(frozen=True, eq=False)
class CalculatorSizing:
    """`basis_costs`: `cost_per_basis` ({} without a trace)."""

    prepared: PreparedSizing
    result: SizingResult
    day: DayCost
    basis_costs: dict[str, float]


def calculator_sizing(payload: Any, user: Any, *, hourly_multipliers: Sequence[float]) -> CalculatorSizing:
    """The API's sizing of `payload` (docs/contract.md §3) as `user` sees the traces, its day and its cost per
    planning basis. Raises SizingInputError (naming the API field) or TraceNotFound, as the API does."""
    return calculator_figures(prepare_sizing(payload, user), hourly_multipliers=hourly_multipliers)


def calculator_figures(prepared: PreparedSizing, *, hourly_multipliers: Sequence[float]) -> CalculatorSizing:
    """What the page shows for inputs already parsed: the sizing, its day and its cost per basis."""
    replays = KvReplays()
    result = size(prepared.inp, replays=replays)
    day = size_prepared_day(prepared, hourly_multipliers=hourly_multipliers)
    return CalculatorSizing(prepared, result, day, cost_per_basis(prepared, result, replays))
