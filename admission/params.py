"""Enforcement parameters from the entitlements database, cached in-process (the snapshot).

The serving path must not query the database per request. A snapshot holds every active
entitlement aggregated per scope (tenant × project × model × region × class) and every pool's
bucket parameters; it is rebuilt when its TTL passes (ADMISSION_SNAPSHOT_TTL_S, default 2 s),
when any entitlement's window starts or ends, and in this process at once when an entitlement
or a health override is saved (signals).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from entitlements.models import Entitlement
from entitlements.selectors import pools_with_totals

BUCKET_DEPTH_S = 60.0


@dataclass(frozen=True)
class PoolParams:
    pool_id: int
    slug: str
    rate: float  # wt/s: deliverable CU × R × healthy/total
    depth: float
    margin: float  # wt of pool room borrowers must leave
    degraded: bool  # the health-scaled rate is below what is sold
    reserved_floor: float  # ≤ 0
    health: tuple[int, int] | None


@dataclass(frozen=True)
class ScopeParams:
    key: str
    entitlement: str  # uuid of the first active entitlement in the scope
    traffic_class: str
    rate: float
    borrow_rate: float  # 0: this scope may not borrow
    max_prompt_tokens: int
    max_output_tokens: int
    output_p95: int
    max_concurrency: int
    ttft_p99_ms: int
    tpot_p99_ms: int
    w_out: float
    w_cached: float
    pool_id: int


@dataclass(frozen=True)
class Snapshot:
    scopes: dict[tuple[str, str, str, str, str], ScopeParams]  # (tenant, project|"", model, region, class)
    pools: dict[int, PoolParams]
    placements: frozenset[tuple[str, str]]  # (model, region) some pool serves
    valid_until: float  # time.monotonic()
    version: int
    # Per-scope reserve plans (admission.plans), built on first use and dropped with the snapshot.
    plans: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def lookup(self, tenant: str, project: str, model: str, region: str, cls: str) -> ScopeParams | None:
        """A project's own entitlements first, then the tenant-wide ones."""
        if project:
            got = self.scopes.get((tenant, project, model, region, cls))
            if got is not None:
                return got
        return self.scopes.get((tenant, "", model, region, cls))


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def pool_health(pool_id: int, overrides: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """Operator override, else the newest fleet sample from telemetry, else None (healthy)."""
    if pool_id in overrides:
        return overrides[pool_id]
    try:
        from telemetry.selectors import latest_pool_health  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return None
    got = latest_pool_health(pool_id)
    return (int(got[0]), int(got[1])) if got else None


def build(now: datetime | None = None, version: int = 0) -> Snapshot:
    from admission.models import PoolHealthOverride

    t = now or timezone.now()
    depth_s = _setting("ADMISSION_BUCKET_DEPTH_S", BUCKET_DEPTH_S)
    margin_frac = _setting("ADMISSION_RECLAIM_MARGIN", 0.2)
    overrides = {o.pool_id: (o.replicas_healthy, o.replicas_total) for o in PoolHealthOverride.objects.all()}
    ents = list(
        Entitlement.objects.filter(revoked_at__isnull=True)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))
        .select_related("tenant", "project", "model", "region", "traffic_class")
        .order_by("pk")
    )
    # The next instant some entitlement starts or ends: the snapshot is stale from then on.
    boundaries = [e.starts_at for e in ents if e.starts_at > t] + [e.ends_at for e in ents if e.ends_at]
    active = [e for e in ents if e.starts_at <= t]
    reserved_rate: dict[int, float] = {}
    for e in active:
        if e.traffic_class_id == "reserved":
            reserved_rate[e.pool_id] = reserved_rate.get(e.pool_id, 0.0) + e.rate_wt_per_s
    pools: dict[int, PoolParams] = {}
    placements = set()
    for row in pools_with_totals(t):
        p = row["pool"]
        placements.add((p.model.slug, p.region.slug))
        r = p.model.r_wt_per_s
        health = pool_health(p.pk, overrides)
        ratio = health[0] / health[1] if health and health[1] > 0 else 1.0
        rate = float(row["deliverable_cu"]) * r * ratio
        pools[p.pk] = PoolParams(
            pool_id=p.pk,
            slug=p.slug,
            rate=rate,
            depth=rate * depth_s,
            margin=margin_frac * rate * depth_s,
            degraded=rate < float(row["sold_cu"]) * r,
            reserved_floor=-reserved_rate.get(p.pk, 0.0) * depth_s,
            health=health,
        )
    scopes: dict[tuple[str, str, str, str, str], ScopeParams] = {}
    for e in active:
        k = (e.tenant.slug, e.project.slug if e.project_id else "", e.model.slug, e.region.slug, e.traffic_class_id)
        scopes[k] = _merge(scopes.get(k), e, k)
    ttl = _setting("ADMISSION_SNAPSHOT_TTL_S", 2.0)
    until = time.monotonic() + ttl
    if boundaries:
        until = min(until, time.monotonic() + max(0.0, (min(boundaries) - t).total_seconds()))
    return Snapshot(scopes=scopes, pools=pools, placements=frozenset(placements), valid_until=until, version=version)


def _merge(prev: ScopeParams | None, e: Entitlement, k: tuple[str, ...]) -> ScopeParams:
    """Several active entitlements in one scope add up (rate, borrowing, concurrency); the envelope is the widest."""
    may_borrow = e.traffic_class.may_borrow and e.overage == Entitlement.Overage.BORROW
    borrow = float(e.borrowing_limit_cu) * e.model.r_wt_per_s if may_borrow else 0.0
    if prev is None:
        return ScopeParams(
            key=":".join(k), entitlement=str(e.uuid), traffic_class=e.traffic_class_id, rate=e.rate_wt_per_s,
            borrow_rate=borrow, max_prompt_tokens=e.max_prompt_tokens, max_output_tokens=e.max_output_tokens,
            output_p95=e.output_p95, max_concurrency=e.max_concurrency, ttft_p99_ms=e.ttft_p99_ms,
            tpot_p99_ms=e.tpot_p99_ms, w_out=e.model.w_out, w_cached=e.model.w_cached, pool_id=e.pool_id,
        )  # fmt: skip
    return ScopeParams(
        key=prev.key, entitlement=prev.entitlement, traffic_class=prev.traffic_class, rate=prev.rate + e.rate_wt_per_s,
        borrow_rate=prev.borrow_rate + borrow, max_prompt_tokens=max(prev.max_prompt_tokens, e.max_prompt_tokens),
        max_output_tokens=max(prev.max_output_tokens, e.max_output_tokens),
        output_p95=max(prev.output_p95, e.output_p95), max_concurrency=prev.max_concurrency + e.max_concurrency,
        ttft_p99_ms=max(prev.ttft_p99_ms, e.ttft_p99_ms), tpot_p99_ms=max(prev.tpot_p99_ms, e.tpot_p99_ms),
        w_out=prev.w_out, w_cached=prev.w_cached, pool_id=prev.pool_id,
    )  # fmt: skip


_lock = threading.Lock()
_current: Snapshot | None = None
_version = 0


def current() -> Snapshot:
    """The live snapshot. When stale, one thread rebuilds it while the others keep serving the
    previous one (only the very first build, or one after `invalidate()`, makes callers wait)."""
    global _current, _version
    snap = _current
    if snap is not None and time.monotonic() < snap.valid_until:
        return snap
    if not _lock.acquire(blocking=snap is None):
        return snap  # type: ignore[return-value]  # someone else is rebuilding: serve the previous one
    try:
        fresh = _current
        if fresh is None or time.monotonic() >= fresh.valid_until:
            _version += 1
            fresh = _current = build(version=_version)
        return fresh
    finally:
        _lock.release()


def invalidate(*_: Any, **__: Any) -> None:
    """Drop the snapshot in this process (signal receiver, tests, the health API)."""
    global _current
    _current = None


def setting_changed(*, setting: str, **_: Any) -> None:
    """The snapshot and its plans hold ADMISSION_* settings: a change (tests) drops them."""
    if setting.startswith("ADMISSION_") or setting == "SECRET_KEY":
        invalidate()
