"""Fully loaded cost per million useful output tokens per pool, weighted over the demand curve.

Every hour pays for every provisioned replica (the reserve idling at night included); every hour
contributes the useful (SLO-met) output tokens it actually produced. The curve-weighted figure is
Σ cost ÷ Σ useful tokens, so busy hours weigh by their traffic and quiet hours by their time.
Marginal cost is reported beside it as a separate figure of another basis (capacity.cost refuses
to compare the two).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from capacity.cost import (
    CloudAccelerator,
    CostFigure,
    CostInputs,
    PurchasedAccelerator,
    accelerators_for,
    compare_costs,
    per_million,
    pool_cost,
)
from entitlements.models import Pool
from forecasting import history

PER_M = "per 1M output tokens"


def _accelerator(acc: Any) -> PurchasedAccelerator | CloudAccelerator:
    if acc.purchase_price_usd > 0:
        return PurchasedAccelerator(
            price=acc.purchase_price_usd,
            depreciation_years=acc.depreciation_years,
            lifetime_utilization=acc.lifetime_utilization,
            maintenance_per_year=acc.purchase_price_usd * acc.maintenance_pct_per_year / 100.0,
        )
    if acc.cloud_reserved_per_hour > 0:
        return CloudAccelerator(
            on_demand_per_hour=acc.cloud_on_demand_per_hour,
            reserved_per_hour=acc.cloud_reserved_per_hour,
            reserved_term_years=acc.reserved_term_months / 12.0,
            commitment="reserved",
        )
    return CloudAccelerator(on_demand_per_hour=acc.cloud_on_demand_per_hour)


def _inputs(acc: Any, slo_met_fraction: float = 1.0) -> CostInputs:
    # Electricity, PUE and idle draw are not catalogue fields; a cloud rate already includes power.
    owned = acc.purchase_price_usd > 0
    busy_kw = acc.power_watts / 1000.0 if owned else 0.0
    return CostInputs(
        host_per_accelerator_hour=acc.host_cost_per_hour,
        power_kw_busy_per_accelerator=busy_kw,
        power_kw_idle_per_accelerator=busy_kw * getattr(settings, "COST_IDLE_POWER_SHARE", 0.3),
        pue=getattr(settings, "COST_PUE", 1.3),
        electricity_per_kwh=getattr(settings, "COST_ELECTRICITY_PER_KWH", 0.10),
        slo_met_fraction=min(max(slo_met_fraction, 1e-9), 1.0),
    )


def _pool_hour(pool: Pool, *, load: float, out_tps: float, slo: float, replicas: int | None = None) -> Any:
    acc = pool.accelerator
    n = pool.replicas if replicas is None else replicas
    return pool_cost(
        accelerator=_accelerator(acc),
        inputs=_inputs(acc, slo),
        # The catalogue counts and prices a TPU slice as one accelerator, so a pool's accelerators are
        # already whole slices (as in entitlements.sizing_specs).
        accelerators=accelerators_for(n, pool.accelerators_per_replica, 1),
        accelerators_per_replica=pool.accelerators_per_replica,
        replicas_total=n,
        replicas_steady=min(n, max(0, round(load * n))),
        load_fraction=load,
        output_tokens_per_s=out_tps,
        network_bytes_per_s=0.0,
        out_tps_per_replica=pool.operating_point.out_tps_per_replica,
    )


def replica_hour_cost(pool: Pool) -> float:
    """Fully loaded cost of one replica idling for an hour (stranded or over-bought capacity)."""
    return float(_pool_hour(pool, load=0.0, out_tps=0.0, slo=1.0, replicas=1).per_hour.value)


def pool_cost_report(*, days: int = 7, end: datetime | None = None) -> list[dict[str, Any]]:
    end = history.floor_hour(end or timezone.now())
    usage = history.hourly_usage(start=end - timedelta(days=days), end=end)
    out = []
    shares = [(pool, share) for rows in history.pool_shares().values() for pool, share in rows]
    for pool, share in sorted(shares, key=lambda ps: ps[0].slug):
        physical = pool.breakdown().physical
        cost = useful = idle = 0.0
        busiest: tuple[float, Any] | None = None
        hours = [u for u in usage if (u.model, u.region) == (pool.model.slug, pool.region.slug)]
        for u in hours:
            out_tps = u.output_tokens * share / 3600.0
            load = (u.arrived_wt * share / 3600.0 / pool.model.r_wt_per_s) / physical if physical > 0 else 0.0
            slo = u.slo_met / u.slo_total if u.slo_total else 1.0
            pc = _pool_hour(pool, load=min(load, 1.0), out_tps=out_tps, slo=slo)
            cost += pc.per_hour.value
            useful += pc.useful_output_tokens_per_hour
            idle += pc.idle_reserve_per_hour
            if busiest is None or out_tps > busiest[0]:
                busiest = (out_tps, pc)
        # Hours with no traffic at all still pay for the whole pool.
        quiet = days * 24 - len(hours)
        if quiet > 0:
            pc0 = _pool_hour(pool, load=0.0, out_tps=0.0, slo=1.0)
            cost += quiet * pc0.per_hour.value
            idle += quiet * pc0.idle_reserve_per_hour
        marginal = busiest[1] if busiest else _pool_hour(pool, load=0.0, out_tps=0.0, slo=1.0)
        out.append(
            {
                "pool": pool.slug,
                "hours": days * 24,
                "cost_usd": round(cost, 2),
                "idle_reserve_share": round(idle / cost, 4) if cost else None,
                "useful_output_tokens": round(useful),
                "fully_loaded": CostFigure(per_million(cost, useful), PER_M, "fully_loaded"),
                "fully_loaded_at_busiest_hour": busiest[1].per_million_useful_output_tokens if busiest else None,
                "marginal": marginal.marginal_per_million_output_tokens,
            }
        )
    return sorted(out, key=_fully_loaded_key)


def _fully_loaded_key(row: dict[str, Any]) -> float:
    # Ranking uses only the fully loaded basis; compare_costs raises if a marginal figure slips in.
    compare_costs(row["fully_loaded"], CostFigure(0.0, PER_M, "fully_loaded"))
    return float(row["fully_loaded"].value)
