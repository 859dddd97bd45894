"""What one accelerator costs per hour, and on what basis: the one place a chip is priced, for a pool and for the
sizing answer alike.

The price list's row for the accelerator, region and term (docs/contract.md §10) when there is one (`list_chip`);
otherwise the catalogue's own figure (owned where it has a purchase price, else the reserved cloud rate, else
on demand: sizing_specs.pool_pricing), so a fleet without a price list keeps the basis it had. The $ per
CU-hour (entitlements.cu_hour_rate), the cost page (forecasting.cost_report) and the sizing answer's `cost`
(sizing_specs.catalogue_inputs via `sizing_chip`) all start here, so the cost page, the statement, planning,
quotes, charges and the calculator read one basis. A price-list rate is a cloud rate: it includes power, so
energy is not added (sizing_specs.cost_inputs with a cloud pricing).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from capacity.cost import AcceleratorCost, CloudAccelerator, CostInputs
from capacity.input_errors import SizingInputError
from entitlements.models import Accelerator, Pool, Price, Region
from entitlements.prices import price_for
from entitlements.sizing_specs import PRICING, CostOptions, accelerator_cost, cost_inputs, pool_pricing

PRICE_LIST = "price_list"


@dataclass(frozen=True)
class PoolChip:
    """`term` is the price list's term when the row came from it (None: the catalogue's basis)."""

    cost: AcceleratorCost
    pricing: str
    term: str | None
    label: str

    def inputs(self, accelerator: Accelerator, opts: CostOptions | None = None) -> CostInputs:
        cloud = "on_demand" if self.pricing == PRICE_LIST else self.pricing
        base = opts or CostOptions()
        return cost_inputs(accelerator, CostOptions(**{**base.__dict__, "pricing": cloud}))


def list_chip(
    accelerator: Accelerator, region_id: int, term: str, on: date | None = None, *, where: str = ""
) -> PoolChip | None:
    """The list's row for this accelerator in this region at this term, in force on `on` (None: no row).
    `where`: the region's name for the label, when the caller's reader does not know it already."""
    row = price_for(accelerator.pk, region_id, term, on)
    if row is None:
        return None
    usd = float(row.usd_per_accelerator_hour)
    label = f"price list, {row.get_term_display()}{where}: ${usd:,.4f} per accelerator-hour from {row.effective_from}"
    return PoolChip(CloudAccelerator(on_demand_per_hour=usd), PRICE_LIST, term, label)


def pool_chip(pool: Pool, term: str | None = None, on: date | None = None) -> PoolChip:
    """Raises SizingInputError (naming cost.pricing) when neither the list nor the catalogue prices it."""
    chip = list_chip(pool.accelerator, pool.region_id, term or pool.term, on)
    if chip is not None:
        return chip
    pricing = pool_pricing(pool.accelerator)
    return PoolChip(accelerator_cost(pool.accelerator, pricing), pricing, None, PRICING[pricing])


def pool_inputs(pool: Pool, opts: CostOptions | None = None) -> CostInputs:
    """The overheads (and, for owned hardware, power) of the pool's basis; an unpriced pool keeps the
    catalogue's own basis for them (its chip counted at 0 by the caller)."""
    try:
        return pool_chip(pool).inputs(pool.accelerator, opts)
    except SizingInputError:
        base = opts or CostOptions()
        return cost_inputs(
            pool.accelerator, CostOptions(**{**base.__dict__, "pricing": pool_pricing(pool.accelerator)})
        )


def serving_pool(model: str, accelerator: str, region: str | None = None) -> Pool | None:
    """The pool that would serve `model` on `accelerator` (in `region` when named): the first by region, then
    slug. The sizing answer's quotes are that pool's, and its `cost` prices the chip in that pool's region."""
    pools = Pool.objects.filter(model__slug=model, accelerator__slug=accelerator).select_related(
        "accelerator", "region", "operating_point"
    )
    if region:
        pools = pools.filter(region__slug=region)
    return pools.order_by("region__slug", "slug").first()


def sizing_chip(model: str, accelerator: Accelerator, region: str | None, term: str) -> PoolChip | None:
    """The sizing answer's chip: the list's row at `term` in the asked region, else in the region of the pool
    that would serve it (serving_pool), else in the first region (by slug) the list prices it at that term.
    None: the list has no row for it at that term, and the catalogue's figure stands (as for a pool)."""
    pool = serving_pool(model, accelerator.slug, region)
    if region:
        region_id = Region.objects.filter(slug=region).values_list("pk", flat=True).first()
    elif pool is not None:
        region_id = pool.region_id
    else:
        region_id = (
            Price.objects.filter(accelerator=accelerator, term=term)
            .order_by("region__slug")
            .values_list("region_id", flat=True)
            .first()
        )
    if region_id is None:
        return None
    where = Region.objects.filter(pk=region_id).values_list("slug", flat=True).first()
    return list_chip(accelerator, region_id, term, where=f" in {where}")
