"""What one accelerator of a pool costs per hour, and on what basis: the one place a pool's chip is priced.

The price list's row for the pool's accelerator, region and term (docs/contract.md §10) when there is one;
otherwise the catalogue's own figure (owned where it has a purchase price, else the reserved cloud rate, else
on demand: sizing_specs.pool_pricing), so a fleet without a price list keeps the basis it had. The $ per
CU-hour (entitlements.cu_hour_rate) and the cost page (forecasting.cost_report) both start here, so the cost
page, the statement, planning, quotes and charges read one basis. A price-list rate is a cloud rate: it
includes power, so energy is not added (sizing_specs.cost_inputs with a cloud pricing).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from capacity.cost import AcceleratorCost, CloudAccelerator, CostInputs
from capacity.input_errors import SizingInputError
from entitlements.models import Pool
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

    def inputs(self, pool: Pool, opts: CostOptions | None = None) -> CostInputs:
        cloud = "on_demand" if self.pricing == PRICE_LIST else self.pricing
        base = opts or CostOptions()
        return cost_inputs(pool.accelerator, CostOptions(**{**base.__dict__, "pricing": cloud}))


def pool_chip(pool: Pool, term: str | None = None, on: date | None = None) -> PoolChip:
    """Raises SizingInputError (naming cost.pricing) when neither the list nor the catalogue prices it."""
    term = term or pool.term
    row = price_for(pool.accelerator_id, pool.region_id, term, on)
    if row is not None:
        usd = float(row.usd_per_accelerator_hour)
        label = f"price list, {row.get_term_display()}: ${usd:,.4f} per accelerator-hour from {row.effective_from}"
        return PoolChip(CloudAccelerator(on_demand_per_hour=usd), PRICE_LIST, term, label)
    pricing = pool_pricing(pool.accelerator)
    return PoolChip(accelerator_cost(pool.accelerator, pricing), pricing, None, PRICING[pricing])


def pool_inputs(pool: Pool, opts: CostOptions | None = None) -> CostInputs:
    """The overheads (and, for owned hardware, power) of the pool's basis; an unpriced pool keeps the
    catalogue's own basis for them (its chip counted at 0 by the caller)."""
    try:
        return pool_chip(pool).inputs(pool, opts)
    except SizingInputError:
        base = opts or CostOptions()
        return cost_inputs(
            pool.accelerator, CostOptions(**{**base.__dict__, "pricing": pool_pricing(pool.accelerator)})
        )
