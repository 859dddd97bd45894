"""Cost over a 24-hour demand curve, weighted by time and traffic.

The cheapest configuration at full load can be the dearest over a day if its replicas cannot
scale down at night. So each hour is costed with the replicas it actually pays for:

- purchased hardware: the day's peak replicas are owned and paid every hour; replicas above the
  hour's need are powered off (no energy), and only energy follows the load;
- cloud: replicas follow the hour's need down to `floor_replicas` (the reserve that stays up at
  night); with a reserved commitment the floor is billed at the reserved rate and the rest on
  demand; each on-demand start is billed for at least `minimum_billing_hours`.

The cost per million useful tokens over the day is Σ cost ÷ Σ useful tokens, so busy hours weigh
more, as they should.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from capacity.cost import (
    PER_MILLION,
    AcceleratorCost,
    CloudAccelerator,
    CostFigure,
    CostInputs,
    accelerators_for,
    per_million,
)
from capacity.input_errors import SizingInputError
from capacity.steps import Step, finite_or_none, num

HOURS = 24


@dataclass(frozen=True)
class HourDemand:
    """What one hour needs: replicas (already including failure and startup reserve) and load."""

    hour: int
    arrival_rate_rps: float
    replicas_needed: int
    demand_wt_per_s: float
    output_tokens_per_s: float
    network_bytes_per_s: float


@dataclass(frozen=True)
class HourRow:
    hour: int
    arrival_rate_rps: float
    replicas_needed: int
    replicas_provisioned: int
    replicas_paid: int
    load_fraction: float
    cost: float
    output_tokens: float
    useful_output_tokens: float
    cost_per_million_useful: float

    def to_dict(self) -> dict[str, object]:
        return {
            "hour": self.hour,
            "arrival_rate_rps": self.arrival_rate_rps,
            "replicas_needed": self.replicas_needed,
            "replicas_provisioned": self.replicas_provisioned,
            "replicas_paid": self.replicas_paid,
            "load_fraction": self.load_fraction,
            "cost": self.cost,
            "output_tokens": self.output_tokens,
            "useful_output_tokens": self.useful_output_tokens,
            "cost_per_million_useful": finite_or_none(self.cost_per_million_useful),
        }


@dataclass(frozen=True)
class DayCost:
    rows: tuple[HourRow, ...]
    cost_per_day: CostFigure
    per_million_useful_output_tokens: CostFigure
    output_tokens_per_day: float
    useful_output_tokens_per_day: float
    floor_replicas: int
    peak_replicas: int
    replica_hours_paid: int
    replica_hours_needed: int
    minimum_billing_surcharge: float
    steps: tuple[Step, ...]
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "cost_per_day": finite_or_none(self.cost_per_day.value),
            "per_million_useful_output_tokens": finite_or_none(self.per_million_useful_output_tokens.value),
            "currency": self.cost_per_day.currency,
            "output_tokens_per_day": self.output_tokens_per_day,
            "useful_output_tokens_per_day": self.useful_output_tokens_per_day,
            "floor_replicas": self.floor_replicas,
            "peak_replicas": self.peak_replicas,
            "replica_hours_paid": self.replica_hours_paid,
            "replica_hours_needed": self.replica_hours_needed,
            "minimum_billing_surcharge": self.minimum_billing_surcharge,
            "steps": [s.to_dict() for s in self.steps],
            "assumptions": list(self.assumptions),
        }


def _runs(on: Sequence[bool]) -> list[tuple[int, int]]:
    """(first hour, length) of each run of True on the 24-hour circle."""
    n = len(on)
    if all(on):
        return [(0, n)]
    off = next(h for h in range(n) if not on[h])  # scan from an off hour so no run is split
    runs: list[tuple[int, int]] = []
    length = 0
    for k in range(1, n + 1):
        i = (off + k) % n
        if on[i]:
            length += 1
        elif length:
            runs.append(((i - length) % n, length))
            length = 0
    return runs


def minimum_billing_extra_hours(provisioned: Sequence[int], floor: int, minimum_hours: float) -> list[float]:
    """Extra billed replica-hours per hour (charged to the hour a run starts): every on-demand
    replica above the floor is billed at least `minimum_hours` per start, but never more than
    the whole day (it would simply be left running)."""
    extra = [0.0] * len(provisioned)
    if minimum_hours <= 1:
        return extra
    for k in range(floor, max(provisioned, default=0)):
        runs = _runs([p > k for p in provisioned])
        billed = sum(max(length, minimum_hours) for _, length in runs)
        used = sum(length for _, length in runs)
        surplus = min(billed, float(len(provisioned))) - used
        if surplus <= 0:
            continue
        for start, length in runs:
            share = (max(length, minimum_hours) - length) / (billed - used)
            extra[start] += surplus * share
    return extra


def day_cost(
    hours: Sequence[HourDemand],
    *,
    accelerator: AcceleratorCost,
    inputs: CostInputs,
    accelerators_per_replica: int,
    chips_per_slice: int,
    goodput_wt_per_replica: float,
    floor_replicas: int,
) -> DayCost:
    """Cost every hour of the day at the replicas it pays for (see the module docstring)."""
    if len(hours) != HOURS:
        raise SizingInputError("hourly", f"needs {HOURS} hours, got {len(hours)}")
    if floor_replicas < 0:
        raise SizingInputError("floor_replicas", "must be ≥ 0")
    inputs.validate()
    apr, cur = accelerators_per_replica, inputs.currency
    provisioned = [max(h.replicas_needed, floor_replicas) for h in hours]
    peak = max(provisioned)
    cloud = isinstance(accelerator, CloudAccelerator)
    on_demand = accelerator.on_demand_per_hour if isinstance(accelerator, CloudAccelerator) else 0.0
    min_hours = accelerator.minimum_billing_hours if isinstance(accelerator, CloudAccelerator) else 0.0
    extra = minimum_billing_extra_hours(provisioned, floor_replicas, min_hours)
    kwh = inputs.energy_per_kwh_delivered()
    per_acc_fixed = inputs.host_per_accelerator_hour + inputs.software_per_accelerator_hour
    rows: list[HourRow] = []
    for h, prov, surcharge_h in zip(hours, provisioned, extra, strict=True):
        paid = prov if cloud else peak
        acc_paid = accelerators_for(paid, apr, chips_per_slice)
        acc_on = accelerators_for(prov, apr, chips_per_slice)
        capacity = prov * goodput_wt_per_replica
        load = min(h.demand_wt_per_s / capacity, 1.0) if capacity > 0 else 0.0
        if isinstance(accelerator, CloudAccelerator):
            reserved = min(floor_replicas, prov) if accelerator.commitment == "reserved" else 0
            acc_reserved = accelerators_for(reserved, apr, chips_per_slice)
            rate_cost = (
                acc_reserved * accelerator.per_hour() + (acc_paid - acc_reserved) * accelerator.on_demand_per_hour
            )
            rate_cost += surcharge_h * apr * (accelerator.on_demand_per_hour + per_acc_fixed)
        else:
            rate_cost = acc_paid * accelerator.per_hour()
        energy = acc_on * (
            inputs.power_kw_idle_per_accelerator
            + (inputs.power_kw_busy_per_accelerator - inputs.power_kw_idle_per_accelerator) * load
        )
        cost = (
            rate_cost
            + acc_paid * per_acc_fixed
            + paid * inputs.storage_per_replica_hour
            + energy * kwh
            + h.network_bytes_per_s * 3600 / 1e9 * inputs.network_per_gb
        )
        out = h.output_tokens_per_s * 3600
        useful = out * inputs.useful_share()
        rows.append(
            HourRow(
                h.hour,
                h.arrival_rate_rps,
                h.replicas_needed,
                prov,
                paid,
                load,
                cost,
                out,
                useful,
                per_million(cost, useful),
            )
        )
    total = sum(r.cost for r in rows)
    useful_day = sum(r.useful_output_tokens for r in rows)
    per_m = per_million(total, useful_day)
    surcharge = sum(extra) * apr * (on_demand + per_acc_fixed)
    paid_hours = sum(r.replicas_paid for r in rows)
    needed_hours = sum(r.replicas_needed for r in rows)
    steps = (
        Step("cost per day", total, f"{cur}/day", f"{num(total)} = Σ of 24 hourly costs"),
        Step("useful output tokens per day", useful_day, "tokens/day", f"{num(useful_day)} = Σ of 24 hours"),
        Step(
            "cost per million useful output tokens over the day",
            per_m,
            f"{cur} {PER_MILLION}",
            f"{num(per_m)} = {num(total)} ÷ ({num(useful_day)} ÷ 1M): hours weigh by their traffic",
        ),
        Step(
            "replica-hours paid",
            paid_hours,
            "replica-hours",
            f"{paid_hours} paid vs {needed_hours} needed ({'peak owned all day' if not cloud else f'floor {floor_replicas}'})",
        ),
    )
    mode = (
        "cloud: replicas follow the hourly need down to the floor; on-demand starts pay the minimum billing interval"
        if cloud
        else "purchased: the peak replicas are owned and paid all day; idle ones are powered off"
    )
    return DayCost(
        rows=tuple(rows),
        cost_per_day=CostFigure(total, "per day", "fully_loaded", cur),
        per_million_useful_output_tokens=CostFigure(per_m, PER_MILLION, "fully_loaded", cur),
        output_tokens_per_day=sum(r.output_tokens for r in rows),
        useful_output_tokens_per_day=useful_day,
        floor_replicas=floor_replicas,
        peak_replicas=peak,
        replica_hours_paid=paid_hours,
        replica_hours_needed=needed_hours,
        minimum_billing_surcharge=surcharge,
        steps=steps,
        assumptions=(f"day cost, {mode}",),
    )
