"""Fully loaded cost per million useful output tokens per pool, weighted over the demand curve.

Every hour pays for every provisioned replica (the reserve idling at night included); every hour
contributes the useful (SLO-met) output tokens it actually produced. The curve-weighted figure is
Σ cost ÷ Σ useful tokens, so busy hours weigh by their traffic and quiet hours by their time.
Marginal cost is reported beside it as a separate figure of another basis (capacity.cost refuses
to compare the two).

Fully loaded means the chip (capital or cloud rate), power, and the catalogue's host, network,
storage and software per accelerator-hour. Useful tokens count the SLO-met share measured from
settled requests; sizing's assumed share stands in only for hours without any, and each pool says
which it used. Usage is placed in the pools holding each tenant's entitlements, as demand is.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.utils import timezone

from capacity.cost import (
    AcceleratorCost,
    CloudAccelerator,
    CostFigure,
    CostInputs,
    PoolCostHours,
    accelerators_for,
    compare_costs,
    per_million,
    pool_cost,
    pool_cost_hours,
)
from capacity.input_errors import SizingInputError
from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Pool
from entitlements.pool_price import pool_chip, pool_inputs
from entitlements.prices import prices_read_once
from entitlements.sizing_specs import CostOptions
from forecasting import history, placement

PER_M = "per 1M output tokens"
UNPRICED = "unpriced: the catalogue has no price for this accelerator (counted at 0)"
# Sizing's assumed SLO-met share: used only for hours whose requests have no SLO counts.
ASSUMED_SLO_MET = CostInputs().slo_met_fraction


def _inputs(pool: Pool, slo_met_fraction: float = 1.0) -> CostInputs:
    # The settings' electricity, PUE and idle draw (CostOptions), the catalogue's overheads.
    return pool_inputs(pool, CostOptions(slo_met_fraction=min(max(slo_met_fraction, 1e-9), 1.0)))


def _chip(pool: Pool) -> tuple[AcceleratorCost, str]:
    """The pool's accelerator price and its basis (entitlements.pool_price: the price list's row for the
    pool's term, else the catalogue's). An accelerator nothing prices still has its overheads and power
    counted: the chip is 0 and the row's `pricing` says so (the sizing API refuses instead, naming cost.pricing)."""
    try:
        chip = pool_chip(pool)
    except SizingInputError:
        return CloudAccelerator(on_demand_per_hour=0.0), UNPRICED
    return chip.cost, chip.pricing


def _pool_hour(pool: Pool, *, load: float, out_tps: float, slo: float, replicas: int | None = None) -> Any:
    n = pool.replicas if replicas is None else replicas
    return pool_cost(
        accelerator=_chip(pool)[0],
        inputs=_inputs(pool, slo),
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


def _pool_hours_cost(pool: Pool, *, load: np.ndarray, out_tps: np.ndarray, slo: np.ndarray) -> PoolCostHours:
    """`_pool_hour` for many hours of one pool at once (arrays of load, output and SLO-met share)."""
    n = pool.replicas
    return pool_cost_hours(
        accelerator=_chip(pool)[0],
        inputs=_inputs(pool),
        accelerators=accelerators_for(n, pool.accelerators_per_replica, 1),
        accelerators_per_replica=pool.accelerators_per_replica,
        replicas_total=n,
        # min(n, max(0, round(load × n))) per hour: numpy's rint rounds halves to even, as round does
        replicas_steady=np.minimum(n, np.maximum(0, np.rint(load * n))).astype(np.int64),
        load_fraction=load,
        output_tokens_per_s=out_tps,
        slo_met_fraction=np.minimum(np.maximum(slo, 1e-9), 1.0),
    )


def replica_hour_cost(pool: Pool) -> float:
    """Fully loaded cost of one replica idling for an hour (stranded or over-bought capacity)."""
    return float(_pool_hour(pool, load=0.0, out_tps=0.0, slo=1.0, replicas=1).per_hour.value)


def _pool_hours(usage: list[history.HourlyUsage], placed: dict) -> dict[int, dict[datetime, list[float]]]:
    """Per pool and hour: [output tokens, SLO met, SLO total, arrived wt], each tenant's usage in
    the pools holding its entitlements (forecasting.placement), as the supply gap places demand."""
    out: dict[int, dict[datetime, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0.0, 0.0]))
    for u in usage:
        for pool_id, share in placed.get((u.tenant, u.model, u.region), []):
            a = out[pool_id][u.hour]
            a[0] += u.output_tokens * share
            a[1] += u.slo_met * share
            a[2] += u.slo_total * share
            a[3] += u.arrived_wt * share
    return out


def _slo_basis(met: float, total: float) -> tuple[float, str]:
    if total > 0:
        return round(met / total, 4), f"measured: {round(total):,} settled requests in the window"
    return ASSUMED_SLO_MET, "assumed: sizing's default, no settled request in the window"


@prices_read_once()  # the price list read once for every pool's rate and cost, not per pool and call
def pool_cost_report(*, days: int = 7, end: datetime | None = None) -> list[dict[str, Any]]:
    end = history.floor_hour(end or timezone.now())
    usage = history.hourly_usage(start=end - timedelta(days=days), end=end)
    by_pool = _pool_hours(usage, placement.pools_by_series(end))
    pools = Pool.objects.select_related("model", "region", "accelerator", "operating_point__model").prefetch_related(
        "zones"
    )
    out = []
    for pool in pools:
        physical = pool.breakdown().physical
        r = pool.model.r_wt_per_s
        cost = useful = idle = met = total = 0.0
        busiest: tuple[float, Any] | None = None
        hours = by_pool.get(pool.pk, {})
        if hours:
            # Every busy hour at once, as arrays (capacity.cost.pool_cost_hours: pool_cost's figures, equal
            # to the last bit); the busiest hour alone gets the full figure with its formulas.
            output, slo_met, slo_total, arrived_wt = (
                np.asarray(col, dtype=float) for col in zip(*hours.values(), strict=True)
            )
            out_tps = output / 3600.0
            load = arrived_wt / 3600.0 / r / physical if physical > 0 else np.zeros(len(hours))
            load = np.minimum(load, 1.0)
            # Measured where the hour has settled requests; sizing's assumption only where it has none.
            measured = slo_total > 0
            slo = np.where(measured, slo_met / np.where(measured, slo_total, 1.0), ASSUMED_SLO_MET)
            hc = _pool_hours_cost(pool, load=load, out_tps=out_tps, slo=slo)
            # Summed hour by hour in the hours' order, as the figures always were (not numpy's pairwise sum).
            for c, u, i in zip(
                hc.per_hour.tolist(),
                hc.useful_output_tokens_per_hour.tolist(),
                hc.idle_reserve_per_hour.tolist(),
                strict=True,
            ):
                cost, useful, idle = cost + c, useful + u, idle + i
            for m, t in zip(slo_met.tolist(), slo_total.tolist(), strict=True):
                met, total = met + m, total + t
            b = int(np.argmax(out_tps))  # the first of the busiest hours
            busiest = (
                float(out_tps[b]),
                _pool_hour(pool, load=float(load[b]), out_tps=float(out_tps[b]), slo=float(slo[b])),
            )
        # Hours with no traffic at all still pay for the whole pool.
        quiet = days * 24 - len(hours)
        if quiet > 0 or busiest is None:  # the idle pool's hour, computed once for both uses
            pc0 = _pool_hour(pool, load=0.0, out_tps=0.0, slo=1.0)
        if quiet > 0:
            cost += quiet * pc0.per_hour.value
            idle += quiet * pc0.idle_reserve_per_hour
        marginal = busiest[1] if busiest else pc0
        share, basis = _slo_basis(met, total)
        acc = pool.accelerator
        out.append(
            {
                "pool": pool.slug,
                "hours": days * 24,
                "pricing": _chip(pool)[1],
                "cost_usd": round(cost, 2),
                "idle_reserve_share": round(idle / cost, 4) if cost else None,
                "useful_output_tokens": round(useful),
                "slo_met_share": share,
                "slo_met_basis": basis,
                "overheads_per_accelerator_hour": {
                    "host": acc.host_cost_per_hour,
                    "network": acc.network_cost_per_hour,
                    "storage": acc.storage_cost_per_hour,
                    "software": acc.software_cost_per_hour,
                    "basis": acc.overhead_basis,
                },
                "fully_loaded": CostFigure(per_million(cost, useful), PER_M, "fully_loaded"),
                "fully_loaded_at_busiest_hour": busiest[1].per_million_useful_output_tokens if busiest else None,
                "marginal": marginal.marginal_per_million_output_tokens,
                # the pool's one $ per CU-hour (issue 33): this page's loaded basis ÷ deliverable CU
                "cu_hour_rate": pool_cu_hour_rate(pool).to_dict(),
            }
        )
    return sorted(out, key=_fully_loaded_key)


def _fully_loaded_key(row: dict[str, Any]) -> float:
    # Ranking uses only the fully loaded basis; compare_costs raises if a marginal figure slips in.
    compare_costs(row["fully_loaded"], CostFigure(0.0, PER_M, "fully_loaded"))
    return float(row["fully_loaded"].value)
