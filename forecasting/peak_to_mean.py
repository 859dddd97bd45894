"""Each entitlement's demand at its own peak-to-mean (issue 30.2, docs/planning.md).

The forecast is of hourly means; a bucket throttles inside the hour. So the supply gap scales each
tenant's share of a pool's forecast by what its entitlements' recorded traffic needs over what its
busiest hour averaged: `factor = planning answer on the window's recorded requests ÷ the busiest
hour's mean CU`. Replayed traffic that fits its busiest hour's mean keeps a factor near 1; a busy minute
4.7× the mean asks more. The planning answer is capacity.planning.plan on the same recorded
workload reconciliation replays (`recorded_workload`, one rule for both), so for one workload the
gap's demand at its busiest hour equals the right-size and grow answer.

The recorded requests are the raw events while they are kept (every burst inside a minute kept),
else the minute rollups (each minute's 3 s arrival slots and wt histogram, capacity.minute_profile;
said so); an entitlement with neither in the window keeps factor 1, and the basis says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from capacity.minute_profile import bin_middles, profile_workload
from capacity.planning import PlanningAnswer, Workload, percent, plan
from capacity.planning_workload import bucket_workload
from entitlements.models import Entitlement
from telemetry.histogram import EDGES_MS
from telemetry.models import ARRIVAL_SLOTS, WT_BINS
from telemetry.recorded import TENANT_GROW_REASONS, Recorded, asked
from telemetry.usage import scope, sums

# A replay per entitlement is too much for every page view; the rollups it reads change by the minute
# but the answer by the hour.
CACHE_S = 3600
_MIDDLES = bin_middles(EDGES_MS)  # the wt histogram's bins (telemetry.models.WT_BINS) read as wt


def target_for(traffic_class: str) -> float:
    """The class's default target throttled share (settings.PLANNING_TARGET_THROTTLED_SHARE)."""
    shares: dict[str, float] = settings.PLANNING_TARGET_THROTTLED_SHARE
    return shares.get(traffic_class, shares["reserved"])


def _label(ent: Entitlement) -> str:
    return f"{ent.tenant.slug}/{ent.model.slug}/{ent.region.slug} {ent.traffic_class_id}"


def events_kept_from(now: datetime | None = None) -> datetime:
    """The oldest moment whose raw events are still kept (TELEMETRY_EVENT_RETENTION_DAYS)."""
    return (now or timezone.now()) - timedelta(days=settings.TELEMETRY_EVENT_RETENTION_DAYS)


def recorded_workload(ent: Entitlement, start: datetime, end: datetime, *, minutes_only: bool = False) -> Workload:
    """What the scope asked for in the window: every reservation admitted or throttled for its own
    quota, concurrency or budget, at its estimate.

    While the window's raw events are kept, each request at its own arrival time (telemetry.recorded:
    one streamed query; the bursts inside a minute are kept, so a replay at the CU bought throttles
    what admission throttled). Past retention, or for a history that only has rollups (imported,
    seeded), the rollups: minutes, then hours, each row's requests placed by its arrival profile and
    costed by its wt histogram where it has them (capacity.minute_profile), else spread evenly at its
    mean cost, and the basis says which. `minutes_only`: no hour rollups."""
    if start >= events_kept_from():
        got = asked(ent, start, end)
        if got.requests:
            return _events_workload(ent, got)
    sources = (("minute", 60.0),) if minutes_only else (("minute", 60.0), ("hour", 3600.0))
    for level, width in sources:
        fields = ("n", "est", "act", *ARRIVAL_SLOTS, *WT_BINS)
        rows = sums(level, scope(ent), start, end, by=("bucket", "decision", "reason"), fields=fields)
        if not rows:
            continue
        reserved = [r for r in rows if r["decision"] in ("admit", "throttle")]
        kept = [r for r in reserved if r["decision"] == "admit" or r["reason"] in TENANT_GROW_REASONS]
        basis = f"{_label(ent)} ({level} rollups: raw events not kept for the window)"
        if not kept:
            kept = [
                {**r, "est": r["act"]}
                for r in rows
                if r["decision"] == "complete" or r["reason"] in TENANT_GROW_REASONS
            ]
            basis += ", settled completions (no reservations recorded)"
        origin = start.timestamp()
        return profile_workload(
            [r["bucket"].timestamp() - origin for r in kept],
            [int(r["n"] or 0) for r in kept],
            [float(r["est"] or 0) for r in kept],
            [[int(r[c] or 0) for c in ARRIVAL_SLOTS] for r in kept],
            [[int(r[c] or 0) for c in WT_BINS] for r in kept],
            middles=_MIDDLES,
            width_s=width,
            name=basis,
        )
    return bucket_workload([], [], [], name=f"{ent.tenant.slug}: no recorded traffic")


def _events_workload(ent: Entitlement, got: Recorded) -> Workload:
    lumped = (
        f"; replayed as {len(got.arrival_s):,} lumps of {got.grain_s:g} s (each at its first arrival, "
        f"at its requests' summed cost: bounded memory, errs only upward)"
        if got.grain_s
        else ""
    )
    return Workload(
        got.arrival_s,
        got.cost_wt,
        f"{_label(ent)}: {got.requests:,} recorded reservations at their own arrival times and estimated weighted "
        f"tokens (raw admission events; {got.throttled:,} throttled by the scope's own limits, "
        f"{percent(got.throttled_share)}){lumped}",
        recorded_throttled_share=got.throttled_share,
    )


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
    """The highest hourly mean CU of the workload (hours counted from its origin, the window's start),
    each hour's weighted tokens over the part of it the record covers: from its first arrival's minute
    to the end of its last arrival's minute. A scope whose record starts or stops inside an hour (a
    demo's few minutes of live traffic, a scope granted mid-hour) is not diluted by the minutes before
    or after it was recorded (÷ 3600 s there put 10 minutes of traffic at a sixth of their rate, and the
    factor planning answer ÷ this mean six times too high: the demo's 705.9 CU gap)."""
    if not len(w):
        return 0.0
    t = w.arrival_s
    hours = np.floor(t / 3600.0).astype(np.int64)
    first = int(hours.min())
    wt = np.bincount(hours - first, weights=w.cost_wt)
    lo, hi = np.floor(t.min() / 60.0) * 60.0, (np.floor(t.max() / 60.0) + 1) * 60.0
    edges = (first + np.arange(len(wt))) * 3600.0
    covered = np.clip(np.minimum(edges + 3600.0, hi) - np.maximum(edges, lo), 60.0, 3600.0)
    return float((wt / covered).max()) / r_wt_per_s


def peak_to_mean(ent: Entitlement, start: datetime, end: datetime) -> PeakToMean | None:
    """None where the window holds neither raw events nor minute rollups of the scope (no view inside
    the hour)."""
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
            "each tenant's share of the forecast × its entitlements' planning answer on the window's recorded "
            "requests (raw events, else minute rollups) ÷ their busiest hour's mean (1 where neither is kept)"
        ),
    }
