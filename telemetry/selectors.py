"""Reads of telemetry: pool health for admission, usage series for people."""

from __future__ import annotations

import io
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db.models import Avg, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import TruncDay, TruncHour, TruncMinute

from capacity.input_errors import FieldError
from entitlements import roles
from entitlements.activity import is_active
from entitlements.models import Entitlement, Pool, Tenant
from entitlements.reasons import REASONS
from entitlements.selectors import entitlements_visible_to, overlapping
from telemetry import usage
from telemetry.histogram import N_BINS, percentile
from telemetry.models import (
    E2E_BINS,
    FLEET_STATE,
    ROLLUP_SOURCE_KINDS,
    ROLLUP_SOURCES,
    TTFT_BINS,
    FleetSample,
    PoolAlert,
    Trace,
)
from telemetry.periods import check_period


def latest_pool_health(pool_id: int) -> tuple[int, int] | None:
    """(replicas_healthy, replicas_total) of the newest fleet sample that reports both, or None."""
    row = (
        FleetSample.objects.filter(pool_id=pool_id, replicas_healthy__isnull=False, replicas_total__isnull=False)
        .order_by("-ts")
        .values_list("replicas_healthy", "replicas_total")
        .first()
    )
    return (int(row[0]), int(row[1])) if row else None  # type: ignore[arg-type]  # both filtered not null


LEVELS = (("minute", 60), ("hour", 3600), ("day", 86400))
ROLLUPS = usage.ROLLUPS
# What a live series sums per bucket, decision and reason (bench/views.py's baseline reads the same).
SERIES_FIELDS = ("n", "est", "act", "out", "slo", "slo_n", *ROLLUP_SOURCES)
MAX_POINTS = 2000


@dataclass(frozen=True)
class Span:
    """A time range resolved to a rollup level and a step that is a whole number of that level's buckets."""

    start: datetime
    end: datetime
    level: str
    step_s: int

    @property
    def points(self) -> list[datetime]:
        n = math.ceil((self.end - self.start).total_seconds() / self.step_s)
        return [self.start + timedelta(seconds=i * self.step_s) for i in range(n)]


def level_for(start: datetime, end: datetime) -> tuple[str, int]:
    """≤ 6 h reads minutes, ≤ 14 d reads hours, longer reads days: long ranges never scan fine rows."""
    span = end - start
    if span <= timedelta(hours=6):
        return LEVELS[0]
    if span <= timedelta(days=14):
        return LEVELS[1]
    return LEVELS[2]


def resolve_span(start: datetime, end: datetime, step_s: int | None = None) -> Span:
    check_period(start, end)
    level, grain = level_for(start, end)
    start = _floor(start, grain)
    step = max(grain, math.ceil((step_s or grain) / grain) * grain)
    while (end - start).total_seconds() / step > MAX_POINTS:
        step += grain
    return Span(start=start, end=end, level=level, step_s=step)


def _floor(t: datetime, grain: int) -> datetime:
    t = t.astimezone(UTC)
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % grain, tz=UTC)


def _rollup_rows(span: Span, scope: Q, latency: bool) -> list[dict[str, Any]]:
    # 64 histogram sums dominate the read: only callers that show percentiles pay for them
    fields = SERIES_FIELDS + (TTFT_BINS + E2E_BINS if latency else ())
    return usage.sums(span.level, scope, span.start, span.end, by=("bucket", "decision", "reason"), fields=fields)


def _entitled(span: Span, ents: list[tuple[datetime, datetime | None, datetime | None, float]]) -> list[float]:
    """wt/s promised at each point: Σ rate of entitlements active at the point's start."""
    out = []
    for t in span.points:
        total = 0.0
        for s, e, revoked, rate in ents:
            if is_active(s, e, revoked, t):
                total += rate
        out.append(total)
    return out


def build_series(span: Span, scope: Q, ents: list[tuple], *, latency: bool = True) -> dict[str, Any]:
    points = span.points
    n = len(points)
    zero = [0.0] * n

    def blank() -> list[float]:
        return list(zero)

    def counts() -> list[int]:
        return [0] * n

    arrived_wt, admitted_wt, est, act = blank(), blank(), blank(), blank()
    arrived_n, admitted_n, completed_n, slo_met, slo_total = counts(), counts(), counts(), counts(), counts()
    ttft = [[0] * N_BINS for _ in range(n)]
    e2e = [[0] * N_BINS for _ in range(n)]
    throttled_wt: dict[str, list[float]] = {}
    throttled_n: dict[str, list[int]] = {}
    # by source (issue 36): admitted borrowed / spilled requests, and the wt those kinds settled
    kind_n = {k: counts() for k in ROLLUP_SOURCE_KINDS}
    kind_wt = {k: blank() for k in ROLLUP_SOURCE_KINDS}
    for r in _rollup_rows(span, scope, latency):
        i = usage.step_of(r["bucket"], span.start, span.step_s)
        if not 0 <= i < n:
            continue
        d = r["decision"]
        if d == "admit":
            admitted_wt[i] += r["est"]
            admitted_n[i] += r["n"]
            est[i] += r["est"]
            for k in ROLLUP_SOURCE_KINDS:
                kind_n[k][i] += r[f"{k}_requests"]
        elif d == "throttle":
            throttled_wt.setdefault(r["reason"], blank())[i] += r["est"]
            throttled_n.setdefault(r["reason"], counts())[i] += r["n"]
        else:
            for f in TTFT_BINS if latency else ():
                ttft[i][int(f[-2:])] += r[f]
            for f in E2E_BINS if latency else ():
                e2e[i][int(f[-2:])] += r[f]
            act[i] += r["act"]
            completed_n[i] += r["n"]
            slo_met[i] += r["slo"]
            slo_total[i] += r["slo_n"]
            for k in ROLLUP_SOURCE_KINDS:
                kind_wt[k][i] += r[f"{k}_wt"]
        if d != "complete":
            arrived_wt[i] += r["est"]
            arrived_n[i] += r["n"]
    per_s = 1.0 / span.step_s

    def rate(xs: list[float]) -> list[float]:
        return [round(x * per_s, 6) for x in xs]

    return {
        "level": span.level,
        "step_s": span.step_s,
        "start": span.start.isoformat(),
        "end": span.end.isoformat(),
        "t": [p.isoformat() for p in points],
        "series": {
            "entitled_wt_per_s": _entitled(span, ents),
            "arrived_wt_per_s": rate(arrived_wt),
            "admitted_wt_per_s": rate(admitted_wt),
            "throttled_wt_per_s": {k: rate(v) for k, v in sorted(throttled_wt.items())},
            "arrived_requests": arrived_n,
            "admitted_requests": admitted_n,
            "throttled_requests": dict(sorted(throttled_n.items())),
            "completed_requests": completed_n,
            **{f"admitted_{k}": kind_n[k] for k in ROLLUP_SOURCE_KINDS},
            **{f"{k}_wt": kind_wt[k] for k in ROLLUP_SOURCE_KINDS},
            "estimated_wt": est,
            "actual_wt": act,
            "slo_met": slo_met,
            "slo_total": slo_total,
            # from merged log-spaced histograms: within one bin (±26 %) of the exact value
            **(
                {
                    "ttft_p50_ms": [_pct(h, 0.5) for h in ttft],
                    "ttft_p99_ms": [_pct(h, 0.99) for h in ttft],
                    "e2e_p50_ms": [_pct(h, 0.5) for h in e2e],
                    "e2e_p99_ms": [_pct(h, 0.99) for h in e2e],
                }
                if latency
                else {}
            ),
        },
        "responsible": {k: REASONS[k].responsible for k in sorted(throttled_n) if k in REASONS},
    }


def _pct(counts: list[int], q: float) -> float | None:
    v = percentile(counts, q)
    return None if v is None else round(v, 1)


def _entitlement_rates(qs: Any) -> list[tuple]:
    return [
        (s, e, rv, float(cu) * r)
        for s, e, rv, cu, r in qs.filter(traffic_class__guaranteed=True).values_list(
            "starts_at", "ends_at", "revoked_at", "cu", "model__r_wt_per_s"
        )
    ]


def usage_series(
    user: Any,
    tenant: str | None,
    model: str | None,
    region: str | None,
    start: datetime,
    end: datetime,
    step: int | None = None,
    *,
    latency: bool = True,
) -> dict[str, Any]:
    """Usage of one tenant (or, for staff with no tenant, everyone) as columnar series.

    A tenant member asking for another tenant gets Tenant.DoesNotExist (→ 404), never an empty series.
    """
    span = resolve_span(start, end, step)
    visible = entitlements_visible_to(user)
    r = roles.roles_of(user)
    own = roles.tenant_of(user)
    staff = bool(r & roles.STAFF_ROLES)
    if not staff:
        if own is None or (tenant and tenant != own.slug):
            raise Tenant.DoesNotExist
        tenant = own.slug
    elif tenant and not Tenant.objects.filter(slug=tenant).exists():
        raise Tenant.DoesNotExist
    scope = Q()
    ents = overlapping(visible, span.start, span.end)
    if tenant:
        scope &= Q(tenant=tenant)
        ents = ents.filter(tenant__slug=tenant)
    if model:
        scope &= Q(model=model)
        ents = ents.filter(model__slug=model)
    if region:
        scope &= Q(region=region)
        ents = ents.filter(region__slug=region)
    out = build_series(span, scope, _entitlement_rates(ents), latency=latency)
    out.update({"tenant": tenant, "model": model, "region": region})
    return out


def entitlement_series(
    ent: Entitlement, start: datetime, end: datetime, step: int | None = None, *, latency: bool = True
) -> dict[str, Any]:
    """One entitlement: its own events, plus unattributed events of its exact scope (e.g. platform throttles)."""
    span = resolve_span(start, end, step)
    rate = float(ent.cu) * ent.model.r_wt_per_s if ent.traffic_class.guaranteed else 0.0
    return build_series(span, usage.scope(ent), [(ent.starts_at, ent.ends_at, ent.revoked_at, rate)], latency=latency)


_TRUNC = {"minute": TruncMinute, "hour": TruncHour, "day": TruncDay}


def fleet_series(start: datetime, end: datetime) -> dict[int, list[dict[str, Any]]]:
    """Per pool, fleet samples averaged per rollup-level bucket (one GROUP BY, not one query per pool)."""
    level, _ = level_for(start, end)
    rows = (
        FleetSample.objects.filter(ts__gte=start, ts__lt=end)
        .annotate(t=_TRUNC[level]("ts", tzinfo=UTC))
        .values("pool_id", "t")
        .annotate(
            util=Avg("accelerator_util"),
            kv=Avg("kv_cache_usage"),
            healthy=Min("replicas_healthy"),
            total=Max("replicas_total"),
        )
        .order_by("pool_id", "t")
    )
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["pool_id"], []).append(r)  # type: ignore[arg-type]  # a values() row is a dict
    return out


def latest_samples() -> dict[int, dict[str, Any]]:
    """The newest sample of every pool, in one query."""
    newest = FleetSample.objects.filter(pool_id=OuterRef("pk")).order_by("-ts").values("pk")[:1]
    # one index probe per pool on (pool, -ts), instead of a correlated scan over every sample
    pks = [pk for pk in Pool.objects.annotate(newest=Subquery(newest)).values_list("newest", flat=True) if pk]
    rows = FleetSample.objects.filter(pk__in=pks).values("pool_id", "ts", *FLEET_STATE)
    return {r["pool_id"]: r for r in rows}


def pool_alerts(pool: Any, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Alertmanager alerts on `pool` (a Pool or its id) that were firing at some time in [start, end).

    For reconciliation's "platform owes" findings: each `{alertname, kind (supply|load), state,
    starts_at, ends_at (None while firing), labels, annotations, fingerprint}`, oldest first.
    """
    pool_id = getattr(pool, "pk", pool)
    rows = (
        PoolAlert.objects.filter(pool_id=pool_id, starts_at__lt=end)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=start))
        .order_by("starts_at", "fingerprint")
    )
    return [{**_alert(a), "annotations": a.annotations} for a in rows]


def supply_alerts_down(pool_id: int) -> int:
    """Replicas a firing supply alert takes out of `pool_id`: one per distinct `instance` label (an alert
    without one counts once by its fingerprint). Resolved alerts count nothing."""
    labels = PoolAlert.objects.filter(
        pool_id=pool_id, kind=PoolAlert.Kind.SUPPLY, state=PoolAlert.State.FIRING
    ).values_list("labels", "fingerprint")
    return len({lab.get("instance") or f"fp:{fp}" for lab, fp in labels})


def recent_pool_alerts(pool: Any, limit: int = 50) -> list[dict[str, Any]]:
    """What `GET pools/{slug}` shows as `alerts`: firing ones first, then the newest resolved."""
    rows = PoolAlert.objects.filter(pool_id=getattr(pool, "pk", pool)).order_by("state", "-starts_at")[:limit]
    return [{**_alert(a), "summary": a.annotations.get("summary", "")} for a in rows]


def _alert(a: PoolAlert) -> dict[str, Any]:
    """An alert's fields both readers give (pool_alerts adds its annotations, the pool's page their summary)."""
    return {
        "alertname": a.alertname,
        "kind": a.kind,
        "state": a.state,
        "starts_at": a.starts_at,
        "ends_at": a.ends_at,
        "labels": a.labels,
        "fingerprint": a.fingerprint,
    }


# --- request traces (written by telemetry.trace_import) ----------------------------------------


class TraceNotFound(FieldError, LookupError):
    """No trace with that id is visible to the caller (it may exist for another tenant: say nothing). A field
    error of the family, and a LookupError: the APIs answer it 404, not 400."""

    named_in_str = True

    def __init__(self, field: str, trace_id: object) -> None:
        super().__init__(field, f"no trace {str(trace_id)[:40]!r}")


@dataclass(frozen=True, eq=False)
class TraceArrays:
    arrival_s: npt.NDArray[np.float64]
    prompt: npt.NDArray[np.int64]
    output: npt.NDArray[np.int64]


def traces_visible_to(user: Any) -> QuerySet[Trace]:
    """Platform-wide traces for everyone signed in; a tenant's traces for its members and staff."""
    qs = Trace.objects.select_related("tenant").defer("data")
    if roles.is_staff_role(user):
        return qs
    tenant = roles.tenant_of(user)
    if tenant is None:
        return qs.filter(tenant__isnull=True)
    return qs.filter(Q(tenant__isnull=True) | Q(tenant=tenant))


def visible_trace(user: Any, trace_id: object, *, field: str = "trace") -> Trace:
    """The trace if the user may see it, else TraceNotFound naming `field` (same answer whether
    it does not exist or belongs to another tenant)."""
    try:
        key = uuid.UUID(str(trace_id))
    except ValueError:
        raise TraceNotFound(field, trace_id)
    trace = traces_visible_to(user).filter(pk=key).first()
    if trace is None:
        raise TraceNotFound(field, trace_id)
    return trace


def trace_arrays(trace: Trace) -> TraceArrays:
    raw = Trace.objects.filter(pk=trace.pk).values_list("data", flat=True).get()
    with np.load(io.BytesIO(bytes(raw)), allow_pickle=False) as z:
        return TraceArrays(
            arrival_s=z["arrival_s"].astype(np.float64),
            prompt=z["prompt"].astype(np.int64),
            output=z["output"].astype(np.int64),
        )
