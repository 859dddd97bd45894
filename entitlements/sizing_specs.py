"""Catalogue rows → the specs `capacity.sizing.size` takes, in one place.

The catalogue stores milliseconds, GB per chip and prices per accelerator; the capacity package
takes seconds, memory per accelerator and cost objects. Converting here keeps both the API and the
calculator page on exactly the same numbers.

A TPU is catalogued as a slice (one accelerator of `chips_per_slice` chips with `memory_gb` per
chip, priced per slice, counted per slice in `accelerators_per_replica`), so the capacity spec gets
the slice's whole memory and `chips_per_slice = 1`: rounding to whole slices already happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from capacity.cost import AcceleratorCost, CloudAccelerator, CostInputs, PurchasedAccelerator
from capacity.input_errors import SizingInputError
from capacity.operating_points import OperatingPoint as PointSpec
from capacity.operating_points import Slo
from capacity.sizing_inputs import AcceleratorSpec, ModelSpec
from capacity.units import ReferenceMix
from entitlements.models import Accelerator, OperatingPoint, PoolZone, ServedModel
from entitlements.models.prices import Term

PRICING = {
    "on_demand": "cloud, on-demand",
    "reserved": "cloud, reserved term",
    "purchased": "purchased hardware",
}


@dataclass(frozen=True)
class CostOptions:
    """What the catalogue does not know. The one place the COST_* settings are read: the sizing API,
    the calculator page's defaults and the planning cost report all start from `CostOptions()`."""

    pricing: str = "on_demand"
    electricity_per_kwh: float = field(default_factory=lambda: settings.COST_ELECTRICITY_PER_KWH)
    pue: float = field(default_factory=lambda: settings.COST_PUE)
    idle_power_share: float = field(default_factory=lambda: settings.COST_IDLE_POWER_SHARE)
    network_per_gb: float = field(default_factory=lambda: settings.COST_NETWORK_PER_GB)
    slo_met_fraction: float = CostInputs().slo_met_fraction
    retry_waste_fraction: float = 0.0


def pool_pricing(acc: Accelerator) -> str:
    """How a pool's accelerators are paid for: owned where the catalogue has a purchase price, else the
    reserved cloud rate where there is one, else on demand (the planning cost report's basis)."""
    if acc.purchase_price_usd > 0:
        return "purchased"
    return "reserved" if acc.cloud_reserved_per_hour > 0 else "on_demand"


def model_spec(m: ServedModel) -> ModelSpec:
    return ModelSpec(
        slug=m.slug,
        kv_bytes_per_token=float(m.kv_bytes_per_token),
        context_length=int(m.context_length),
        weights_gb=float(m.weights_gb),
        r_wt_per_s=float(m.r_wt_per_s),
        w_out=float(m.w_out),
        w_cached=float(m.w_cached),
        active_params_b=float(m.active_params_b) if m.active_params_b else None,
    )


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def point_label(op: OperatingPoint) -> str:
    return f"{op.model.slug} on {op.accelerators_per_replica}× {op.accelerator.slug}, {op.runtime}, {op.scenario}"


def point_spec(op: OperatingPoint) -> PointSpec:
    """Latency limits and measured p99s in seconds; `label` names the catalogue row people can look up."""
    return PointSpec(
        label=point_label(op),
        accelerator=op.accelerator.slug,
        accelerators_per_replica=int(op.accelerators_per_replica),
        out_tps_per_replica=float(op.out_tps_per_replica),
        ref_mix=ReferenceMix(mean_prompt=float(op.ref_mean_prompt), mean_output=float(op.ref_mean_output)),
        ttft_limit_s=_s(op.ttft_p99_limit_ms),
        tpot_limit_s=_s(op.tpot_p99_limit_ms),
        measured_ttft_p99_s=_s(op.measured_ttft_p99_ms),
        measured_tpot_p99_s=_s(op.measured_tpot_p99_ms),
        is_ceiling=bool(op.is_ceiling),
        source=op.source,
        instances_per_replica=int(op.instances_per_replica),
    )


def accelerator_cost(acc: Accelerator, pricing: str) -> AcceleratorCost:
    """The price of one catalogue accelerator under a pricing choice; a price the catalogue does not
    have is an error naming `cost.pricing`, never a silent zero."""
    if pricing == "purchased":
        if acc.purchase_price_usd <= 0:
            raise SizingInputError("cost.pricing", f"{acc.slug} has no purchase price in the catalogue (cloud only)")
        return PurchasedAccelerator(
            price=acc.purchase_price_usd,
            depreciation_years=acc.depreciation_years,
            lifetime_utilization=acc.lifetime_utilization,
            maintenance_per_year=acc.purchase_price_usd * acc.maintenance_pct_per_year / 100.0,
        )
    if pricing not in PRICING:
        raise SizingInputError("cost.pricing", f"expected one of {', '.join(PRICING)} (got {pricing!r})")
    if pricing == "reserved" and acc.cloud_reserved_per_hour <= 0:
        raise SizingInputError("cost.pricing", f"{acc.slug} has no reserved cloud rate in the catalogue")
    if acc.cloud_on_demand_per_hour <= 0 and pricing == "on_demand":
        raise SizingInputError("cost.pricing", f"{acc.slug} has no on-demand cloud rate in the catalogue")
    return CloudAccelerator(
        on_demand_per_hour=acc.cloud_on_demand_per_hour,
        reserved_per_hour=acc.cloud_reserved_per_hour if acc.cloud_reserved_per_hour > 0 else None,
        reserved_term_years=acc.reserved_term_months / 12.0,
        minimum_billing_hours=acc.min_billing_minutes / 60.0,
        commitment="reserved" if pricing == "reserved" else "on_demand",
    )


def accelerator_spec(acc: Accelerator, pricing: str | None = None) -> AcceleratorSpec:
    """The capacity spec of one catalogue accelerator (a TPU slice counts as one accelerator with the
    slice's whole memory, see above). `pricing=None`: memory and compute only, no price (pool fit)."""
    spec = AcceleratorSpec(
        slug=acc.slug,
        memory_gb=float(acc.memory_gb) * acc.chips_per_slice,
        chips_per_slice=1,
        dense_tflops=float(acc.dense_tflops_per_chip) * acc.chips_per_slice if acc.dense_tflops_per_chip else None,
    )
    return spec if pricing is None else replace(spec, cost=accelerator_cost(acc, pricing))


def cost_inputs(acc: Accelerator, opts: CostOptions) -> CostInputs:
    """Owned hardware pays its own power (busy = the catalogue's watts, idle = a share of it);
    a cloud rate already includes power, so energy is 0 there. The catalogue's host, network fabric
    and storage shares are fixed charges per accelerator-hour, so they are one per-accelerator line
    (capacity's `network_per_gb` prices traffic, which the catalogue does not); software is its own."""
    owned = opts.pricing == "purchased"
    busy_kw = acc.power_watts / 1000.0 if owned else 0.0
    return CostInputs(
        host_per_accelerator_hour=float(acc.host_cost_per_hour + acc.network_cost_per_hour + acc.storage_cost_per_hour),
        software_per_accelerator_hour=float(acc.software_cost_per_hour),
        power_kw_busy_per_accelerator=busy_kw,
        power_kw_idle_per_accelerator=busy_kw * opts.idle_power_share,
        pue=opts.pue,
        electricity_per_kwh=opts.electricity_per_kwh,
        network_per_gb=opts.network_per_gb,
        slo_met_fraction=opts.slo_met_fraction,
        retry_waste_fraction=opts.retry_waste_fraction,
    )


@dataclass(frozen=True, eq=False)
class CatalogueInputs:
    """What `SizingInput` needs from the catalogue, plus the row behind each point spec."""

    fleet: dict[str, int]
    model: ModelSpec
    points: tuple[PointSpec, ...]
    accelerators: tuple[AcceleratorSpec, ...]
    cost_inputs: CostInputs
    rows: dict[PointSpec, OperatingPoint]
    price_basis: tuple[str, ...] = ()  # per accelerator, where its $ per hour comes from (the answer's assumptions)

    def row_for(self, point: PointSpec) -> OperatingPoint:
        return self.rows[point]


def fleet_accelerators() -> dict[str, int]:
    """Accelerators of each type over every pool (replicas × accelerators per replica): the catalogue
    fleet a sizing is IMPLAUSIBLE beyond."""
    fleet: dict[str, int] = {}
    for slug, apr, replicas in PoolZone.objects.values_list(
        "pool__accelerator__slug", "pool__accelerators_per_replica", "replicas"
    ):
        fleet[slug] = fleet.get(slug, 0) + apr * replicas
    return fleet


def catalogue_inputs(
    *,
    model: Any,
    accelerator: Any,
    slo: Slo,
    cost: CostOptions,
    allow_ceiling: bool = False,
    region: str | None = None,
    term: str = "on_demand",
) -> CatalogueInputs:
    """Resolve slugs and price every accelerator the model's points run on.

    Each accelerator is priced as a pool is (entitlements.pool_price, one $ basis): the price list's row at
    `term` in `region` (else the serving pool's region: pool_price.sizing_chip), plus the catalogue's
    overheads; only where the list has no row does the catalogue's own figure under `cost.pricing` stand.
    `size()` then sizes each feasible point and keeps the cheapest, so each accelerator carries its
    own host and power costs. An accelerator without a price under the chosen pricing is left out
    (sizing says so); if none is priced, the error names `cost.pricing`. Errors name `model`,
    `accelerator` or `cost.*`. `allow_ceiling` is taken for the signature's sake: the choice is size()'s.
    """
    from entitlements.pool_price import sizing_chip  # pool_price builds on this module

    if not isinstance(model, str) or not model:
        raise SizingInputError("model", "required: a model slug from the catalogue")
    m = ServedModel.objects.filter(slug=model).first()
    if m is None:
        raise SizingInputError("model", f"unknown model '{model[:64]}'")
    rows = list(OperatingPoint.objects.filter(model=m).select_related("model", "accelerator").order_by("pk"))
    if accelerator not in (None, ""):
        if not isinstance(accelerator, str) or not Accelerator.objects.filter(slug=accelerator).exists():
            raise SizingInputError("accelerator", f"unknown accelerator '{str(accelerator)[:64]}'")
        rows = [r for r in rows if r.accelerator.slug == accelerator]
        if not rows:
            raise SizingInputError("accelerator", f"no operating point of {m.slug} is measured on {accelerator}")
    if not rows:
        raise SizingInputError("model", f"no operating point of {m.slug} is in the catalogue")
    specs = {point_spec(r): r for r in rows}
    priced: list[AcceleratorSpec] = []
    basis: list[str] = []
    first_error: SizingInputError | None = None
    for acc in {r.accelerator.slug: r.accelerator for r in rows}.values():
        chip = sizing_chip(m.slug, acc, region, term)
        if chip is not None:
            priced.append(replace(accelerator_spec(acc), cost=chip.cost, cost_inputs=chip.inputs(acc, cost)))
            basis.append(f"{acc.slug} priced from the {chip.label}")
            continue
        try:
            priced.append(replace(accelerator_spec(acc, cost.pricing), cost_inputs=cost_inputs(acc, cost)))
            words = Term(term).label
            basis.append(f"{acc.slug} priced from the catalogue ({PRICING[cost.pricing]}): no price-list row {words}")
        except SizingInputError as e:
            first_error = first_error or e
    if not priced:
        assert first_error is not None
        raise first_error
    return CatalogueInputs(
        fleet=fleet_accelerators(),
        model=model_spec(m),
        points=tuple(specs),
        accelerators=tuple(priced),
        cost_inputs=priced[0].cost_inputs or CostInputs(),
        rows=specs,
        price_basis=tuple(basis),
    )
