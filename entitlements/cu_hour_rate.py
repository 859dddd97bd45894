"""One $ per CU-hour per pool (issue 33): the statement's showback, the cost page and planning all
price a CU-hour with this function, so the three show the same figure with the same derivation.

rate = the pool's fully loaded cost per hour ÷ the pool's deliverable CU.

The cost per hour is the cost page's basis (forecasting.cost_report) for an hour of the whole
provisioned pool: every replica paid, reserve included, at the pool's own pricing (owned where the
catalogue has a purchase price, else reserved, else on demand: sizing_specs.pool_pricing), with the
catalogue's host, network, storage and software per accelerator-hour and the idle power draw. The
energy above idle that work adds is the marginal figure (capacity.cost keeps the two bases apart),
so it is left out: the rate is then a property of the pool, not of one week's traffic, and a
statement of any period reads the same rate as the pages of today.

Dividing by deliverable (not physical) CU is what makes it "loaded": the failover reserve,
maintenance, safety and fragmentation are paid for but never sold, so each sold CU-hour carries
their share.
"""

from __future__ import annotations

from dataclasses import dataclass

from capacity.cost import accelerators_for, pool_cost
from capacity.input_errors import SizingInputError
from entitlements.models import Pool
from entitlements.sizing_specs import PRICING, CostOptions, accelerator_cost, cost_inputs, pool_pricing


@dataclass(frozen=True)
class CuHourRate:
    """`usd_per_cu_hour` None: the pool cannot be priced, `derivation` says why."""

    pool: str
    usd_per_cu_hour: float | None
    cost_per_hour: float
    deliverable_cu: float
    pricing: str
    lines: tuple[tuple[str, float, str], ...]
    derivation: str

    def to_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "usd_per_cu_hour": self.usd_per_cu_hour,
            "cost_per_hour": self.cost_per_hour,
            "deliverable_cu": self.deliverable_cu,
            "pricing": self.pricing,
            "lines": [{"name": n, "per_hour": v, "formula": f} for n, v, f in self.lines],
            "derivation": self.derivation,
        }


def pool_cu_hour_rate(pool: Pool) -> CuHourRate:
    acc = pool.accelerator
    pricing = pool_pricing(acc)
    deliverable_cu = float(pool.breakdown().deliverable)
    try:
        chip = accelerator_cost(acc, pricing)
    except SizingInputError as exc:
        return CuHourRate(pool.slug, None, 0.0, deliverable_cu, pricing, (), f"no price: {exc.message}")
    n = pool.replicas
    pc = pool_cost(
        accelerator=chip,
        inputs=cost_inputs(acc, CostOptions(pricing=pricing)),
        # a TPU slice is catalogued and priced as one accelerator (entitlements.sizing_specs)
        accelerators=accelerators_for(n, pool.accelerators_per_replica, 1),
        accelerators_per_replica=pool.accelerators_per_replica,
        replicas_total=n,
        replicas_steady=0,
        load_fraction=0.0,
        output_tokens_per_s=0.0,
        network_bytes_per_s=0.0,
        out_tps_per_replica=pool.operating_point.out_tps_per_replica,
    )
    per_hour = float(pc.per_hour.value)
    lines = tuple((ln.name, ln.per_hour, ln.formula) for ln in pc.lines if ln.per_hour)
    shown = " + ".join(f"{name} ${v:,.4f}" for name, v, _ in lines) or "$0"
    if deliverable_cu <= 0:
        why = f"pool {pool.slug} delivers no CU: no rate per CU-hour"
        return CuHourRate(pool.slug, None, per_hour, deliverable_cu, pricing, lines, why)
    rate = per_hour / deliverable_cu
    derivation = (
        f"pool {pool.slug} ({PRICING[pricing]}): {n} replicas, fully loaded ${per_hour:,.4f}/h "
        f"({shown}) ÷ {deliverable_cu:,.2f} deliverable CU = ${rate:,.4f} per CU-hour"
    )
    return CuHourRate(pool.slug, rate, per_hour, deliverable_cu, pricing, lines, derivation)


def usd_per_wt(pool: Pool) -> float | None:
    """$ per weighted token served from `pool` (issue 51.3: what a $ budget charges): the CU-hour's
    rate over the R × 3600 weighted tokens a CU-hour is. None: the pool cannot be priced."""
    rate = pool_cu_hour_rate(pool)
    r = pool.model.r_wt_per_s
    if rate.usd_per_cu_hour is None or r <= 0:
        return None
    return rate.usd_per_cu_hour / (r * 3600.0)
