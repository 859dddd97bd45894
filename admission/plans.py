"""Reserve plans: what every reserve in one scope shares, built once per snapshot.

A reserve is one store round trip plus whatever Python does around it, so the per-request work
is kept to the request's own values: the backend's half of the operation (`base.Scope`: keys,
rates, limits), the static fields of the reservation's meta and of its events, and the settings
they depend on are prepared here on the first reserve of a scope and kept with the snapshot
(`Snapshot.plans`), which is rebuilt whenever entitlements, pools or health change.
"""

from __future__ import annotations

from django.conf import settings

from admission.core import build_plan, spill_target
from admission.serving_types import Plan
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot

__all__ = ["Plan", "plan_for", "ttl_s", "idem_ttl_s"]


def ttl_s() -> float:
    return settings.ADMISSION_RESERVATION_TTL_S


def idem_ttl_s() -> int:
    return settings.ADMISSION_IDEMPOTENCY_TTL_S


def plan_for(snap: Snapshot, sp: ScopeParams, pool: PoolParams, prefix: str, who: tuple[str, str, str, str]) -> Plan:
    """`who`: the (tenant, model, region, class) of the request, which the scope matched exactly."""
    key = (prefix, sp.key)
    got = snap.plans.get(key)
    if got is None:
        depth_s = settings.ADMISSION_BUCKET_DEPTH_S
        got = snap.plans[key] = build_plan(
            sp, pool, prefix, who, depth_s=depth_s, ttl_s=ttl_s(), idem_ttl_s=idem_ttl_s(),
            target=spill_target(snap, sp),
        )  # fmt: skip
    return got
