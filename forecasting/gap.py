"""Supply gap per pool and week over the 26-week horizon, and the cost of being wrong.

Computed live from the newest run's pool demand and today's supply (zones, reserves, pending
supply orders), so a new order or entitlement shows without re-forecasting. Demand per week is the
peak hour: a pool short for one hour a week still throttles in that hour; and each hour is at the
pool's entitlements' own peak-to-mean (forecasting.peak_to_mean): a bucket throttles inside the hour.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
from django.db.models import F
from django.utils import timezone

from capacity.deliverable import deliverable, deliverable_under_failure
from capacity.failure import parse_failure_policy
from capacity.planning_orders import Order, add_replicas, order_to_close
from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Entitlement
from entitlements.models.supply import as_cu
from entitlements.prices import prices_read_once
from entitlements.selectors import Window, peak_sold
from forecasting.models import CommittedAdjustment, ForecastRun, PoolDemand, SupplyOrder
from forecasting.peak_to_mean import pool_factor
from forecasting.selectors import latest_run

WEEK_H = 168
SCENARIOS = ("committed", "expected", "upside", "stress")
FORECAST_SCENARIOS = ("expected", "upside", "stress")


def cu(value: float | Decimal) -> float:
    """Every figure the gap compares, at the one CU precision approvals compare in (as_cu): a pool
    sold exactly to its deliverable is then exactly full, not a rounding error short."""
    return float(as_cu(value))


def _first_gap(starts: list[date], gaps: list[Decimal], lead_weeks: int, today: date, order: dict) -> dict:
    first = next((i for i, g in enumerate(gaps) if g > 0), None)
    worst = max(gaps, default=Decimal(0))
    if first is None:
        return {"first_week": None, "order_by": None, "late": False, "max_gap_cu": 0.0, "replicas_short": 0}
    order_by = starts[first] - timedelta(weeks=lead_weeks)
    return {
        "first_week": starts[first],
        "order_by": order_by,
        "late": order_by < today,
        "max_gap_cu": float(worst),
        # One order per scenario closes both cases: a healthy-only count can leave the after-failure
        # gap open once the zone spread is counted (issue 30.4).
        "replicas_short": order["replicas"],
        "order": order,
    }


def _order_row(o: Order, *, zones: list[str], starts: list[date], today: date, lead_weeks: int) -> dict[str, Any]:
    """The scenario's order as the planning page and the API show it: how many, where each goes, and
    the deliverables recomputed with it at the week that needs the most."""
    arrives = today + timedelta(weeks=lead_weeks)
    after_horizon = bool(starts) and arrives >= starts[-1] + timedelta(weeks=1)
    reason = o.reason or (
        f"an order placed today arrives {arrives:%Y-%m-%d}, after the horizon's last week: no order closes the gap "
        "within the horizon"
        if after_horizon and o.replicas
        else ""
    )
    return {
        "replicas": o.replicas,
        "closes": o.closes,
        "closes_within_horizon": o.closes and not after_horizon,
        "by_zone": [
            {"zone": z, "add": n} for z, n in zip(zones or ["(no zone)"], o.added_per_zone, strict=False) if n > 0
        ],
        "week": starts[o.week] if starts else None,
        "demand_cu": cu(o.demand_cu),
        "after_order": {"healthy_cu": cu(o.healthy_cu), "failure_cu": cu(o.failure_cu)},
        "arrives": arrives,
        "reason": reason,
    }


def pool_gap(
    pd_row: PoolDemand,
    *,
    today: date,
    orders: list[SupplyOrder],
    committed_rows: list,
    peak: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`peak` (forecasting.peak_to_mean.pool_factor): the forecast's hourly means scaled to what the
    pool's entitlements' own traffic needs inside the hour; without it the hourly means as forecast."""
    pool = pd_row.pool
    start: datetime = pd_row.start
    factor = float(peak["factor"]) if peak else 1.0
    hourly = {k: np.asarray(v, dtype=float) * factor for k, v in pd_row.hourly.items()}
    n_weeks = len(hourly["expected"]) // WEEK_H
    starts = [(start + timedelta(weeks=i)).date() for i in range(n_weeks)]
    base = pool.supply()
    policy = parse_failure_policy(pool.failure_policy)
    # One replica's share of deliverable (deductions are percentages of physical) sizes a shortfall.
    per_replica = deliverable(replace(base, reserve_held_cu=0.0), replicas=1).deliverable
    weeks: list[dict[str, Any]] = []
    supplies = []
    for i, ws in enumerate(starts):
        we = ws + timedelta(weeks=1)
        extra = sum(o.replicas for o in orders if o.arrival_date < we)
        supply = replace(base, replicas_per_zone=add_replicas(base.replicas_per_zone, extra)) if extra else base
        supplies.append(supply)
        sl = slice(i * WEEK_H, (i + 1) * WEEK_H)
        t0 = start + timedelta(weeks=i)
        weeks.append(
            {
                "start": ws,
                "replicas": supply.replicas,
                "healthy_cu": cu(deliverable(supply).deliverable),
                "failure_cu": cu(deliverable_under_failure(supply, policy).deliverable),
                "committed_cu": cu(peak_sold(committed_rows, Window(t0, t0 + timedelta(weeks=1)))),
                **{f"{k}_cu": cu(hourly[k][sl].max()) for k in FORECAST_SCENARIOS},
                "stranded_cu": float(np.clip(deliverable(supply).deliverable - hourly["expected"][sl], 0, None).mean()),
            }
        )
    zones = [z.zone.slug for z in pool.zones.all()]
    lead = pool.accelerator.lead_time_weeks
    orders_by = {
        s: _order_row(
            order_to_close(supplies, [w[f"{s}_cu"] for w in weeks], policy, as_cu=cu),
            zones=zones,
            starts=starts,
            today=today,
            lead_weeks=lead,
        )
        for s in SCENARIOS
    }
    gaps = {
        s: {
            case: _first_gap(
                starts,
                [as_cu(w[f"{s}_cu"]) - as_cu(w[f"{case}_cu"]) for w in weeks],
                lead,
                today,
                orders_by[s],
            )
            for case in ("healthy", "failure")
        }
        for s in SCENARIOS
    }
    # the pool's one $ per CU-hour, the statement's and the cost page's too (issue 33)
    rate = pool_cu_hour_rate(pool)
    usd_per_cu_h = rate.usd_per_cu_hour or 0.0
    stranded_cu_h = sum(w["stranded_cu"] * WEEK_H for w in weeks)
    return {
        "pool": pool.slug,
        "accelerator": pool.accelerator.slug,
        "lead_time_weeks": pool.accelerator.lead_time_weeks,
        "failure_policy": str(policy),
        "cu_per_replica_deliverable": per_replica,
        "weeks": weeks,
        "gaps": gaps,
        "stranded": {
            "mean_cu": stranded_cu_h / (len(weeks) * WEEK_H) if weeks else 0.0,
            "cost_usd": stranded_cu_h * usd_per_cu_h,
            "basis": "idle CU-hours × the pool's $ per CU-hour",
        },
        "cu_hour_rate": rate.to_dict(),
        "cost_of_being_wrong": cost_of_being_wrong(pd_row, weeks, usd_per_cu_hour=usd_per_cu_h, hourly=hourly),
        "peak_to_mean": peak,
    }


def cost_of_being_wrong(
    pd_row: PoolDemand,
    weeks: list[dict],
    *,
    usd_per_cu_hour: float,
    hourly: dict[str, np.ndarray] | None = None,
) -> list[dict]:
    """Plan for expected and get S: throttled wt. Plan for S and get expected: idle capacity bought for S.

    A plan sizes each week to that scenario's peak hour; "with today's supply" uses the planned
    deliverable instead. Tenants affected: tenants with demand in the pool when any hour is short.
    """
    r = pd_row.pool.model.r_wt_per_s
    h = hourly if hourly is not None else {k: np.asarray(v, dtype=float) for k, v in pd_row.hourly.items()}
    n = len(weeks) * WEEK_H
    plan_expected = np.repeat([w["expected_cu"] for w in weeks], WEEK_H)
    today_supply = np.repeat([w["healthy_cu"] for w in weeks], WEEK_H)
    tenants = sorted(t for t, share in pd_row.tenants.items() if share > 0)
    rows = []
    for s in ("upside", "stress"):
        short_vs_plan = np.clip(h[s][:n] - plan_expected, 0, None)
        short_vs_today = np.clip(h[s][:n] - today_supply, 0, None)
        idle_cu_h = float(sum(max(0.0, w[f"{s}_cu"] - w["expected_cu"]) for w in weeks) * WEEK_H)
        rows.append(
            {
                "scenario": s,
                "under_throttled_wt": float(short_vs_plan.sum() * 3600 * r),
                "under_tenants_affected": len(tenants) if short_vs_plan.any() else 0,
                "today_throttled_wt": float(short_vs_today.sum() * 3600 * r),
                "today_tenants_affected": len(tenants) if short_vs_today.any() else 0,
                "over_idle_cu_hours": idle_cu_h,
                "over_idle_cost_usd": idle_cu_h * usd_per_cu_hour,
            }
        )
    return rows


def committed_rows(pool_ids: list[int]) -> dict[int, list]:
    """pool → (start, end, cu) rows whose sweep is the committed series: the sold entitlements, plus the
    committed adjustments still pending (an accepted reconciliation finding, issue 17.2)."""
    sold: dict[int, list] = {}
    ents = Entitlement.objects.filter(pool_id__in=pool_ids, revoked_at__isnull=True, traffic_class__counts_as_sold=True)
    for pool_id, s, e, cu in ents.values_list("pool_id", "starts_at", "ends_at", "cu"):
        sold.setdefault(pool_id, []).append((s, e, cu))
    for pool_id, row in committed_adjustments(pool_ids):
        sold.setdefault(pool_id, []).append(row)
    return sold


def committed_adjustments(pool_ids: list[int]) -> list[tuple[int, tuple]]:
    """(pool, (from, until, cu_delta)) of every CommittedAdjustment whose entitlement is still at the
    version it was made for and still sold; the sweep (peak_sold) takes negative rows as they come."""
    out = []
    adjustments = CommittedAdjustment.objects.filter(
        entitlement__pool_id__in=pool_ids,
        entitlement__revoked_at__isnull=True,
        entitlement__traffic_class__counts_as_sold=True,
        entitlement_version=F("entitlement__version"),
    ).values_list("entitlement__pool_id", "from_ts", "entitlement__starts_at", "entitlement__ends_at", "cu_delta")
    for pool_id, from_ts, starts, ends, delta in adjustments:
        out.append((pool_id, (max(from_ts, starts), ends, delta)))
    return out


@prices_read_once()  # the price list read once for every pool's rate and cost, not per pool and call
def supply_gap(*, run: ForecastRun | None = None, today: date | None = None) -> tuple[ForecastRun | None, list[dict]]:
    run = run or latest_run()
    if run is None:
        return None, []
    today = today or timezone.now().date()
    rows = list(
        PoolDemand.objects.filter(run=run)
        .select_related("pool__model", "pool__accelerator", "pool__operating_point__model")
        .prefetch_related("pool__zones__zone")
    )
    pool_ids = [r.pool_id for r in rows]
    orders: dict[int, list[SupplyOrder]] = {}
    for o in SupplyOrder.objects.filter(pool_id__in=pool_ids, status__in=SupplyOrder.PENDING):
        orders.setdefault(o.pool_id, []).append(o)
    sold = committed_rows(pool_ids)
    return run, [
        pool_gap(
            r,
            today=today,
            orders=orders.get(r.pool_id, []),
            committed_rows=sold.get(r.pool_id, []),
            peak=pool_factor(r.pool_id, r.tenants),
        )
        for r in rows
    ]
