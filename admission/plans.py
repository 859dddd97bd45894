"""Reserve plans: what every reserve in one scope shares, built once per snapshot.

A reserve is one store round trip plus whatever Python does around it, so the per-request work
is kept to the request's own values: the backend's half of the operation (`base.Scope`: keys,
rates, limits), the static fields of the reservation's meta and of its events, and the settings
they depend on are prepared here on the first reserve of a scope and kept with the snapshot
(`Snapshot.plans`), which is rebuilt whenever entitlements, pools or health change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from admission.backends.base import Bucket, Scope
from admission.params import BUCKET_DEPTH_S, PoolParams, ScopeParams, Snapshot

DEFAULT_TTL_S = 600.0
DEFAULT_IDEM_TTL_S = 900


def ttl_s() -> float:
    return float(getattr(settings, "ADMISSION_RESERVATION_TTL_S", DEFAULT_TTL_S))


def idem_ttl_s() -> int:
    return int(getattr(settings, "ADMISSION_IDEMPOTENCY_TTL_S", DEFAULT_IDEM_TTL_S))


@dataclass(frozen=True)
class Plan:
    params: ScopeParams
    scope: Scope
    meta_tail: str  # the meta's static JSON members and its closing brace
    event_head: dict[str, Any]  # the static fields of this scope's admit / throttle events


def plan_for(snap: Snapshot, sp: ScopeParams, pool: PoolParams, prefix: str, who: tuple[str, str, str, str]) -> Plan:
    """`who`: the (tenant, model, region, class) of the request, which the scope matched exactly."""
    key = (prefix, sp.key)
    got = snap.plans.get(key)
    if got is None:
        got = snap.plans[key] = _build(sp, pool, prefix, *who)
    return got


def _build(sp: ScopeParams, pool: PoolParams, p: str, tenant: str, model: str, region: str, cls: str) -> Plan:
    depth_s = float(getattr(settings, "ADMISSION_BUCKET_DEPTH_S", BUCKET_DEPTH_S))
    borrow = Bucket(f"{p}bb:{sp.key}", sp.borrow_rate, sp.borrow_rate * depth_s) if sp.borrow_rate else None
    scope = Scope(
        inflight_key=f"{p}if:{sp.key}", max_concurrency=sp.max_concurrency, traffic_class=sp.traffic_class,
        own=Bucket(f"{p}b:{sp.key}", sp.rate, sp.rate * depth_s), pool=Bucket(f"{p}p:{pool.pool_id}", pool.rate, pool.depth),
        borrow=borrow, margin=pool.margin, degraded=pool.degraded, reserved_floor=pool.reserved_floor,
        ttl_s=ttl_s(), idem_ttl_s=idem_ttl_s(), w_out=sp.w_out, w_cached=sp.w_cached,
        max_output=sp.max_output_tokens,
    )  # fmt: skip
    static_meta = {"tenant": tenant, "model": model, "region": region, "traffic_class": cls,
                   "ttft_slo": sp.ttft_p99_ms, "tpot_slo": sp.tpot_p99_ms, "entitlement": sp.entitlement}  # fmt: skip
    head = {"tenant": tenant, "model": model, "region": region, "traffic_class": cls, "entitlement": sp.entitlement}
    return Plan(sp, scope, json.dumps(static_meta, separators=(",", ":"))[1:], head)
