"""Each entitlement's demand at its own peak-to-mean (issue 30.2, docs/planning.md).

The forecast is of hourly means; a bucket throttles inside the hour. So the supply gap scales each
tenant's share of a pool's forecast by what its entitlements' recorded traffic needs over what its
busiest hour averaged: `factor = planning answer on the window's minute rollups ÷ the busiest hour's
mean CU`. Replayed traffic that fits its busiest hour's mean keeps a factor near 1; a busy minute
4.7× the mean asks more. The planning answer is capacity.planning.plan on the same recorded
workload reconciliation replays (`recorded_workload`, one rule for both), so for one workload the
gap's demand at its busiest hour equals the right-size and grow answer.

Only minute rollups show what happens inside an hour: an entitlement without them in the window
keeps factor 1, and the basis says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db.models import Sum
from django.utils import timezone

from capacity.planning import PlanningAnswer, Workload, plan
from capacity.planning_workload import bucket_workload
from entitlements.models import Entitlement
from telemetry.models import HourRollup, MinuteRollup
from telemetry.usage import scope

TENANT_GROW_REASONS = frozenset({"QUOTA_EXCEEDED", "CONCURRENCY_LIMIT", "BUDGET_EXHAUSTED"})
# A replay per entitlement is too much for every page view; the rollups it reads change by the minute
# but the answer by the hour.
CACHE_S = 3600


def target_for(traffic_class: str) -> float:
    """The class's default target throttled share (settings.PLANNING_TARGET_THROTTLED_SHARE)."""
    shares: dict[str, float] = settings.PLANNING_TARGET_THROTTLED_SHARE
    return shares.get(traffic_class, shares["reserved"])


def recorded_workload(ent: Entitlement, start: datetime, end: datetime, *, minutes_only: bool = False) -> Workload:
    """What the scope asked for in the window, minute by minute: every reservation admitted or
    throttled for its own quota, concurrency or budget, at its estimate. Minute rollups where they
    are kept; hours (spread over the hour, said so) where only hour rollups hold the history; the
    settled completions where no reservation was recorded at all (an imported history)."""
    asked = {"admit", "throttle"}
    sources = (
        ((MinuteRollup, 60.0, "minute"),)
        if minutes_only
        else ((MinuteRollup, 60.0, "minute"), (HourRollup, 3600.0, "hour"))
    )
    for model, width, what in sources:
        rows = list(
            model.objects.filter(scope(ent), bucket__gte=start, bucket__lt=end)
            .values("bucket", "decision", "reason")
            .annotate(n=Sum("requests"), est=Sum("estimated_wt"), act=Sum("actual_wt"))
            .order_by()
        )
        if not rows:
            continue
        reserved = [r for r in rows if r["decision"] in asked]
        kept = [r for r in reserved if r["decision"] == "admit" or r["reason"] in TENANT_GROW_REASONS]
        basis = f"{ent.tenant.slug}/{ent.model.slug}/{ent.region.slug} {ent.traffic_class_id} ({what} rollups)"
        if not kept:
            kept = [
                {**r, "est": r["act"]}
                for r in rows
                if r["decision"] == "complete" or r["reason"] in TENANT_GROW_REASONS
            ]
            basis += ", settled completions (no reservations recorded)"
        origin = start.timestamp()
        return bucket_workload(
            [r["bucket"].timestamp() - origin for r in kept],
            [int(r["n"] or 0) for r in kept],
            [float(r["est"] or 0) for r in kept],
            width_s=width,
            name=basis,
        )
    return bucket_workload([], [], [], name=f"{ent.tenant.slug}: no recorded traffic")


def planning_answer(ent: Entitlement, w: Workload) -> PlanningAnswer:
    return plan(
        w,
        r_wt_per_s=float(ent.model.r_wt_per_s or 1.0),
        target_throttled_share=target_for(ent.traffic_class_id),
        depth_s=float(settings.ADMISSION_BUCKET_DEPTH_S),
    )


@dataclass(frozen=True)
class PeakToMean:
    entitlement: str
    tenant: str
    cu_to_buy: float
    busiest_hour_cu: float
    check: str

    @property
    def factor(self) -> float:
        return self.cu_to_buy / self.busiest_hour_cu if self.busiest_hour_cu > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "entitlement": self.entitlement,
            "tenant": self.tenant,
            "cu_to_buy": self.cu_to_buy,
            "busiest_hour_cu": self.busiest_hour_cu,
            "factor": self.factor,
            "check": self.check,
        }


def window(now: datetime | None = None) -> tuple[datetime, datetime]:
    """Reconciliation's window: the RECONCILE_WINDOW_DAYS before the current hour."""
    end = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    return end - timedelta(days=settings.RECONCILE_WINDOW_DAYS), end


def busiest_hour_cu(w: Workload, r_wt_per_s: float) -> float:
    """The highest hourly mean CU of the workload (hours counted from its origin, the window's start)."""
    if not len(w):
        return 0.0
    hours = np.floor(w.arrival_s / 3600.0).astype(np.int64)
    return float(np.bincount(hours, weights=w.cost_wt).max()) / 3600.0 / r_wt_per_s


def peak_to_mean(ent: Entitlement, start: datetime, end: datetime) -> PeakToMean | None:
    """None where the window holds no minute rollups of the scope (no view inside the hour)."""
    key = f"peak-to-mean:{ent.uuid}:{ent.version}:{start.isoformat()}:{end.isoformat()}"
    hit = cache.get(key)
    if hit is not None:
        return hit or None
    w = recorded_workload(ent, start, end, minutes_only=True)
    out: PeakToMean | None = None
    if len(w):
        answer = planning_answer(ent, w)
        out = PeakToMean(
            str(ent.uuid),
            ent.tenant.slug,
            answer.cu_to_buy,
            busiest_hour_cu(w, float(ent.model.r_wt_per_s or 1.0)),
            answer.check,
        )
    cache.set(key, out or False, CACHE_S)
    return out


def pool_factor(pool_id: int, tenant_shares: dict[str, float], *, now: datetime | None = None) -> dict[str, Any]:
    """The pool's forecast multiplier: each tenant's share of the pool's demand at its entitlements'
    own peak-to-mean (Σ planning answers ÷ Σ busiest-hour means over its entitlements in the pool
    with minute rollups), 1 for a tenant without them."""
    start, end = window(now)
    ents = Entitlement.objects.filter(pool_id=pool_id, revoked_at__isnull=True, starts_at__lt=end).select_related(
        "tenant", "model", "region", "project"
    )
    by_tenant: dict[str, list[PeakToMean]] = {}
    for ent in ents:
        if ent.ends_at is not None and ent.ends_at <= start:
            continue
        got = peak_to_mean(ent, start, end)
        if got is not None:
            by_tenant.setdefault(got.tenant, []).append(got)
    total = sum(s for s in tenant_shares.values() if s > 0)
    factor, tenants = 0.0, {}
    for slug, share in tenant_shares.items():
        rows = by_tenant.get(slug, [])
        mean = sum(r.busiest_hour_cu for r in rows)
        f = sum(r.cu_to_buy for r in rows) / mean if mean > 0 else 1.0
        tenants[slug] = f
        if total > 0 and share > 0:
            factor += share / total * f
    if total <= 0:
        factor = 1.0
    measured = [r.to_dict() for rows in by_tenant.values() for r in rows]
    return {
        "factor": factor,
        "by_tenant": tenants,
        "entitlements": measured,
        "window": {"start": start, "end": end},
        "basis": (
            "each tenant's share of the forecast × its entitlements' planning answer on the window's minute rollups "
            "÷ their busiest hour's mean (1 where no minute rollups are kept)"
        ),
    }
