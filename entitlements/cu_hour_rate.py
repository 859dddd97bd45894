"""One $ per CU-hour per pool (issue 33): the statement's showback, the cost page and planning all
price a CU-hour with this function, so the three show the same figure with the same derivation.

rate = the pool's fully loaded cost per hour ÷ the pool's deliverable CU.

The cost per hour is the cost page's basis (forecasting.cost_report) for an hour of the whole
provisioned pool: every replica paid, reserve included, at the pool's own pricing (the price list's
row for the pool's term, else the catalogue's figure: entitlements.pool_price), with the
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
from entitlements.pool_price import pool_chip


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
    term: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "usd_per_cu_hour": self.usd_per_cu_hour,
            "cost_per_hour": self.cost_per_hour,
            "deliverable_cu": self.deliverable_cu,
            "pricing": self.pricing,
            "lines": [{"name": n, "per_hour": v, "formula": f} for n, v, f in self.lines],
            "derivation": self.derivation,
            "term": self.term,
        }


def pool_cu_hour_rate(pool: Pool, term: str | None = None) -> CuHourRate:
    """`term`: price the pool's accelerators at another term of the list (a quote, a tenant's commitment);
    default the pool's own."""
    deliverable_cu = float(pool.breakdown().deliverable)
    try:
        chip = pool_chip(pool, term)
    except SizingInputError as exc:
        return CuHourRate(pool.slug, None, 0.0, deliverable_cu, "unpriced", (), f"no price: {exc.message}", term)
    pricing = chip.pricing
    n = pool.replicas
    pc = pool_cost(
        accelerator=chip.cost,
        inputs=chip.inputs(pool.accelerator),
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
        return CuHourRate(pool.slug, None, per_hour, deliverable_cu, pricing, lines, why, chip.term)
    rate = per_hour / deliverable_cu
    derivation = (
        f"pool {pool.slug} ({chip.label}): {n} replicas, fully loaded ${per_hour:,.4f}/h "
        f"({shown}) ÷ {deliverable_cu:,.2f} deliverable CU = ${rate:,.4f} per CU-hour"
    )
    return CuHourRate(pool.slug, rate, per_hour, deliverable_cu, pricing, lines, derivation, chip.term)
