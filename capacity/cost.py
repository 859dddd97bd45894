"""Fully loaded cost of a pool, cost per useful output token, and marginal cost — kept apart.

A fully loaded figure pays for everything provisioned (accelerators, hosts, energy, storage,
network, software, the idle reserve); a marginal figure is only what one more unit of work adds
on capacity that is already paid for. Comparing one option's marginal cost with another's fully
loaded cost makes the first look cheap for no reason, so `CostFigure` carries its basis and
refuses to be compared across bases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from capacity.input_errors import SizingInputError
from capacity.steps import Step, finite_or_none, num

Basis = Literal["fully_loaded", "marginal"]
HOURS_PER_YEAR = 8760.0
PER_MILLION = "per 1M output tokens"


class CostBasisError(ValueError):
    """Two cost figures of different bases (or units) were compared."""


@dataclass(frozen=True)
class CostFigure:
    value: float
    unit: str
    basis: Basis
    currency: str = "USD"

    def _key(self, other: CostFigure) -> tuple[float, float]:
        if self.basis != other.basis:
            raise CostBasisError(f"cannot compare a {self.basis} cost with a {other.basis} cost")
        if self.unit != other.unit or self.currency != other.currency:
            raise CostBasisError(f"cannot compare {self.currency} {self.unit} with {other.currency} {other.unit}")
        return self.value, other.value

    def __lt__(self, other: CostFigure) -> bool:
        a, b = self._key(other)
        return a < b

    def __le__(self, other: CostFigure) -> bool:
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other: CostFigure) -> bool:
        a, b = self._key(other)
        return a > b

    def __ge__(self, other: CostFigure) -> bool:
        a, b = self._key(other)
        return a >= b

    def to_dict(self) -> dict[str, object]:
        return {"value": finite_or_none(self.value), "unit": self.unit, "basis": self.basis, "currency": self.currency}


def compare_costs(a: CostFigure, b: CostFigure) -> int:
    """−1, 0 or 1 as a is cheaper, equal or dearer; CostBasisError on mismatched bases or units."""
    x, y = a._key(b)
    return (x > y) - (x < y)


@dataclass(frozen=True)
class PurchasedAccelerator:
    """Owned hardware: the price spread over the hours it is in service, plus maintenance."""

    price: float
    depreciation_years: float
    lifetime_utilization: float = 1.0
    maintenance_per_year: float = 0.0

    def per_hour(self) -> float:
        capital = self.price / (self.depreciation_years * HOURS_PER_YEAR * self.lifetime_utilization)
        return capital + self.maintenance_per_year / HOURS_PER_YEAR

    def explain(self) -> str:
        return (
            f"price {num(self.price)} ÷ ({num(self.depreciation_years)} years × 8,760 h × "
            f"{num(self.lifetime_utilization)} lifetime utilization) + maintenance "
            f"{num(self.maintenance_per_year)}/year ÷ 8,760 h"
        )

    def validate(self, prefix: str) -> None:
        _non_negative(prefix, "price", self.price)
        _non_negative(prefix, "maintenance_per_year", self.maintenance_per_year)
        if not self.depreciation_years > 0:
            raise SizingInputError(f"{prefix}.depreciation_years", "must be > 0")
        if not 0 < self.lifetime_utilization <= 1:
            raise SizingInputError(f"{prefix}.lifetime_utilization", "must be in (0, 1]")


@dataclass(frozen=True)
class CloudAccelerator:
    """Rented per accelerator-hour. `reserved` pays the term rate for the committed replicas
    whether used or not; on-demand pays at least `minimum_billing_hours` per start."""

    on_demand_per_hour: float
    reserved_per_hour: float | None = None
    reserved_term_years: float = 1.0
    minimum_billing_hours: float = 0.0
    commitment: Literal["on_demand", "reserved"] = "on_demand"

    def per_hour(self) -> float:
        if self.commitment == "reserved" and self.reserved_per_hour is not None:
            return self.reserved_per_hour
        return self.on_demand_per_hour

    def explain(self) -> str:
        if self.commitment == "reserved" and self.reserved_per_hour is not None:
            return f"reserved {num(self.reserved_term_years)}-year term rate {num(self.reserved_per_hour)}/h"
        return f"on-demand rate {num(self.on_demand_per_hour)}/h"

    def validate(self, prefix: str) -> None:
        _non_negative(prefix, "on_demand_per_hour", self.on_demand_per_hour)
        _non_negative(prefix, "minimum_billing_hours", self.minimum_billing_hours)
        if self.reserved_per_hour is not None:
            _non_negative(prefix, "reserved_per_hour", self.reserved_per_hour)
        if self.commitment == "reserved" and self.reserved_per_hour is None:
            raise SizingInputError(f"{prefix}.reserved_per_hour", "a reserved commitment needs a reserved rate")


AcceleratorCost = PurchasedAccelerator | CloudAccelerator


@dataclass(frozen=True)
class CostInputs:
    """Everything but the accelerator itself. Power figures are per accelerator including its host
    share; a cloud instance price usually includes host and power, so leave those at 0 there."""

    host_per_accelerator_hour: float = 0.0
    software_per_accelerator_hour: float = 0.0
    storage_per_replica_hour: float = 0.0
    power_kw_busy_per_accelerator: float = 0.0
    power_kw_idle_per_accelerator: float = 0.0
    pue: float = 1.0
    electricity_per_kwh: float = 0.0
    network_per_gb: float = 0.0
    slo_met_fraction: float = 0.99
    retry_waste_fraction: float = 0.0
    currency: str = "USD"

    def validate(self, prefix: str = "cost_inputs") -> None:
        for name in (
            "host_per_accelerator_hour",
            "software_per_accelerator_hour",
            "storage_per_replica_hour",
            "power_kw_busy_per_accelerator",
            "power_kw_idle_per_accelerator",
            "electricity_per_kwh",
            "network_per_gb",
        ):
            _non_negative(prefix, name, getattr(self, name))
        if self.power_kw_idle_per_accelerator > self.power_kw_busy_per_accelerator:
            raise SizingInputError(f"{prefix}.power_kw_idle_per_accelerator", "idle power exceeds busy power")
        if not self.pue >= 1:
            raise SizingInputError(f"{prefix}.pue", "PUE must be ≥ 1")
        if not 0 < self.slo_met_fraction <= 1:
            raise SizingInputError(f"{prefix}.slo_met_fraction", "must be in (0, 1]")
        if not 0 <= self.retry_waste_fraction < 1:
            raise SizingInputError(f"{prefix}.retry_waste_fraction", "must be in [0, 1)")

    def energy_per_kwh_delivered(self) -> float:
        """Price of one kWh at the accelerator, cooling included."""
        return self.pue * self.electricity_per_kwh

    def useful_share(self) -> float:
        return self.slo_met_fraction * (1 - self.retry_waste_fraction)


def _non_negative(prefix: str, name: str, x: float) -> None:
    if not x >= 0 or x == float("inf"):
        raise SizingInputError(f"{prefix}.{name}", f"must be a finite number ≥ 0 (got {x!r})")


@dataclass(frozen=True)
class CostLine:
    name: str
    per_hour: float
    formula: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "per_hour": self.per_hour, "formula": self.formula}


@dataclass(frozen=True)
class PoolCost:
    per_hour: CostFigure
    per_million_useful_output_tokens: CostFigure
    marginal_per_million_output_tokens: CostFigure
    lines: tuple[CostLine, ...]
    idle_reserve_per_hour: float
    useful_output_tokens_per_hour: float
    steps: tuple[Step, ...]
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "per_hour": finite_or_none(self.per_hour.value),
            "per_million_useful_output_tokens": finite_or_none(self.per_million_useful_output_tokens.value),
            "marginal_per_million_output_tokens": finite_or_none(self.marginal_per_million_output_tokens.value),
            "currency": self.per_hour.currency,
            "lines": [line.to_dict() for line in self.lines],
            "idle_reserve_per_hour": self.idle_reserve_per_hour,
            "useful_output_tokens_per_hour": self.useful_output_tokens_per_hour,
        }


def per_million(cost_per_hour: float, tokens_per_hour: float) -> float:
    """Cost per million tokens; infinite when nothing useful is produced (shown as n/a)."""
    return cost_per_hour / (tokens_per_hour / 1e6) if tokens_per_hour > 0 else float("inf")


def marginal_per_million_output(
    *,
    inputs: CostInputs,
    accelerators_per_replica: int,
    out_tps_per_replica: float,
    network_bytes_per_output_token: float,
) -> tuple[float, str]:
    """Only what extra work adds on paid-for capacity: the energy above idle a replica draws while
    producing its goodput, and the bytes sent per output token. Returns (value, formula)."""
    kw = inputs.power_kw_busy_per_accelerator - inputs.power_kw_idle_per_accelerator
    energy_per_hour = accelerators_per_replica * kw * inputs.energy_per_kwh_delivered()
    energy = per_million(energy_per_hour, out_tps_per_replica * 3600)
    network = network_bytes_per_output_token / 1e9 * inputs.network_per_gb * 1e6
    formula = (
        f"{num(energy + network)} = energy {num(accelerators_per_replica)} accelerators × "
        f"({num(inputs.power_kw_busy_per_accelerator)} − {num(inputs.power_kw_idle_per_accelerator)}) kW × "
        f"PUE {num(inputs.pue)} × {num(inputs.electricity_per_kwh)}/kWh ÷ "
        f"({num(out_tps_per_replica)} tok/s × 3,600 s ÷ 1M) + network {num(network_bytes_per_output_token)} B/token "
        f"× {num(inputs.network_per_gb)}/GB × 1M ÷ 1e9"
    )
    return energy + network, formula


def pool_cost(
    *,
    accelerator: AcceleratorCost,
    inputs: CostInputs,
    accelerators: int,
    accelerators_per_replica: int,
    replicas_total: int,
    replicas_steady: int,
    load_fraction: float,
    output_tokens_per_s: float,
    network_bytes_per_s: float,
    out_tps_per_replica: float,
) -> PoolCost:
    """Hourly cost of a provisioned pool and what it costs per million useful output tokens.

    `load_fraction` is the share of the pool's goodput in use; it scales the energy above idle.
    """
    inputs.validate()
    rate = accelerator.per_hour()
    kwh = inputs.energy_per_kwh_delivered()
    load = min(max(load_fraction, 0.0), 1.0)
    idle_energy = accelerators * inputs.power_kw_idle_per_accelerator * kwh
    busy_kw = inputs.power_kw_busy_per_accelerator - inputs.power_kw_idle_per_accelerator
    load_energy = accelerators * busy_kw * load * kwh
    gb_per_hour = network_bytes_per_s * 3600 / 1e9
    cur = inputs.currency
    lines = (
        CostLine("accelerators", accelerators * rate, f"{accelerators} × {num(rate)}/h ({accelerator.explain()})"),
        CostLine(
            "hosts",
            accelerators * inputs.host_per_accelerator_hour,
            f"{accelerators} × {num(inputs.host_per_accelerator_hour)}/h",
        ),
        CostLine(
            "software",
            accelerators * inputs.software_per_accelerator_hour,
            f"{accelerators} × {num(inputs.software_per_accelerator_hour)}/h",
        ),
        CostLine(
            "storage",
            replicas_total * inputs.storage_per_replica_hour,
            f"{replicas_total} replicas × {num(inputs.storage_per_replica_hour)}/h",
        ),
        CostLine(
            "energy (idle draw)",
            idle_energy,
            f"{accelerators} × {num(inputs.power_kw_idle_per_accelerator)} kW × PUE {num(inputs.pue)} × "
            f"{num(inputs.electricity_per_kwh)}/kWh",
        ),
        CostLine(
            "energy (load)",
            load_energy,
            f"{accelerators} × ({num(inputs.power_kw_busy_per_accelerator)} − "
            f"{num(inputs.power_kw_idle_per_accelerator)}) kW × load {num(load)} × PUE {num(inputs.pue)} × "
            f"{num(inputs.electricity_per_kwh)}/kWh",
        ),
        CostLine(
            "network", gb_per_hour * inputs.network_per_gb, f"{num(gb_per_hour)} GB/h × {num(inputs.network_per_gb)}/GB"
        ),
    )
    per_hour = sum(line.per_hour for line in lines)
    per_accel_fixed = accelerators * (rate + inputs.host_per_accelerator_hour + inputs.software_per_accelerator_hour)
    idle_acc_share = (accelerators - replicas_steady * accelerators_per_replica) / accelerators if accelerators else 0.0
    idle_rep_share = (replicas_total - replicas_steady) / replicas_total if replicas_total else 0.0
    idle_reserve = idle_acc_share * (per_accel_fixed + idle_energy) + idle_rep_share * lines[3].per_hour
    useful = output_tokens_per_s * 3600 * inputs.useful_share()
    per_m = per_million(per_hour, useful)
    bytes_per_out = network_bytes_per_s / output_tokens_per_s if output_tokens_per_s > 0 else 0.0
    marginal, marginal_formula = marginal_per_million_output(
        inputs=inputs,
        accelerators_per_replica=accelerators_per_replica,
        out_tps_per_replica=out_tps_per_replica,
        network_bytes_per_output_token=bytes_per_out,
    )
    steps = (
        Step("cost per hour", per_hour, f"{cur}/h", f"{num(per_hour)} = " + " + ".join(num(x.per_hour) for x in lines)),
        Step(
            "of which idle reserve",
            idle_reserve,
            f"{cur}/h",
            f"{num(idle_reserve)} = the share of fixed costs for {accelerators - replicas_steady * accelerators_per_replica} "
            f"accelerators beyond the {replicas_steady} steady replicas",
        ),
        Step(
            "useful output tokens per hour",
            useful,
            "tokens/h",
            f"{num(useful)} = {num(output_tokens_per_s)} tok/s × 3,600 s × SLO met {num(inputs.slo_met_fraction)} × "
            f"(1 − retry waste {num(inputs.retry_waste_fraction)})",
        ),
        Step(
            "cost per million useful output tokens",
            per_m,
            f"{cur} {PER_MILLION}",
            f"{num(per_m)} = {num(per_hour)}/h ÷ ({num(useful)} tokens/h ÷ 1M)",
        ),
        Step("marginal cost per million output tokens", marginal, f"{cur} {PER_MILLION}", marginal_formula),
    )
    assumptions = (
        "cost: every provisioned replica is paid, including the failure and startup reserve",
        "cost: useful output = output tokens × SLO-met fraction × (1 − retry waste); partial output of cancelled "
        "requests is counted as output",
        "cost: marginal cost is energy above idle plus network for extra work on capacity already provisioned; "
        "it is never mixed with the fully loaded figures",
    )
    return PoolCost(
        per_hour=CostFigure(per_hour, "per hour", "fully_loaded", cur),
        per_million_useful_output_tokens=CostFigure(per_m, PER_MILLION, "fully_loaded", cur),
        marginal_per_million_output_tokens=CostFigure(marginal, PER_MILLION, "marginal", cur),
        lines=lines,
        idle_reserve_per_hour=idle_reserve,
        useful_output_tokens_per_hour=useful,
        steps=steps,
        assumptions=assumptions,
    )


@dataclass(frozen=True)
class PoolCostHours:
    """`pool_cost`'s per-hour figures for many hours at once (arrays, one element per hour)."""

    per_hour: np.ndarray
    idle_reserve_per_hour: np.ndarray
    useful_output_tokens_per_hour: np.ndarray


def pool_cost_hours(
    *,
    accelerator: AcceleratorCost,
    inputs: CostInputs,
    accelerators: int,
    accelerators_per_replica: int,
    replicas_total: int,
    replicas_steady: np.ndarray,
    load_fraction: np.ndarray,
    output_tokens_per_s: np.ndarray,
    slo_met_fraction: np.ndarray,
    network_bytes_per_s: float = 0.0,
) -> PoolCostHours:
    """`pool_cost`'s cost per hour, idle reserve and useful output tokens of one pool over many hours,
    each hour with its own steady replicas, load, output and SLO-met share (everything else fixed).

    The same formula as `pool_cost`, operation for operation and in the same order, so each element
    equals the `.per_hour.value`, `.idle_reserve_per_hour` and `.useful_output_tokens_per_hour` of
    `pool_cost` called for that hour with `inputs` at that hour's `slo_met_fraction` (tested for
    equality, not closeness). No formulas or steps: the busiest hour's full figure is `pool_cost`'s.
    """
    inputs.validate()
    slo = np.asarray(slo_met_fraction, dtype=float)
    if slo.size and not bool(np.all((slo > 0) & (slo <= 1))):
        raise SizingInputError("cost_inputs.slo_met_fraction", "must be in (0, 1]")
    rate = accelerator.per_hour()
    kwh = inputs.energy_per_kwh_delivered()
    load = np.minimum(np.maximum(np.asarray(load_fraction, dtype=float), 0.0), 1.0)
    idle_energy = accelerators * inputs.power_kw_idle_per_accelerator * kwh
    busy_kw = inputs.power_kw_busy_per_accelerator - inputs.power_kw_idle_per_accelerator
    load_energy = accelerators * busy_kw * load * kwh
    gb_per_hour = network_bytes_per_s * 3600 / 1e9
    storage = replicas_total * inputs.storage_per_replica_hour
    # sum(line.per_hour for line in lines) in pool_cost: added left to right, in the lines' order
    per_hour = (
        accelerators * rate
        + accelerators * inputs.host_per_accelerator_hour
        + accelerators * inputs.software_per_accelerator_hour
        + storage
        + idle_energy
        + load_energy
        + gb_per_hour * inputs.network_per_gb
    )
    per_accel_fixed = accelerators * (rate + inputs.host_per_accelerator_hour + inputs.software_per_accelerator_hour)
    steady = np.asarray(replicas_steady, dtype=np.int64)
    zeros = np.zeros(steady.shape)
    idle_acc_share = (accelerators - steady * accelerators_per_replica) / accelerators if accelerators else zeros
    idle_rep_share = (replicas_total - steady) / replicas_total if replicas_total else zeros
    idle_reserve = idle_acc_share * (per_accel_fixed + idle_energy) + idle_rep_share * storage
    useful = np.asarray(output_tokens_per_s, dtype=float) * 3600 * (slo * (1 - inputs.retry_waste_fraction))
    return PoolCostHours(per_hour=per_hour, idle_reserve_per_hour=idle_reserve, useful_output_tokens_per_hour=useful)


def accelerators_for(replicas: int, accelerators_per_replica: int, chips_per_slice: int) -> int:
    """Accelerators come in whole slices (a TPU slice, an 8-GPU host): round up to one."""
    chips = replicas * accelerators_per_replica
    return -(-chips // chips_per_slice) * chips_per_slice
