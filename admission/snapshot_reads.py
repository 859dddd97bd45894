"""The snapshot's database reads, one per part, as plain rows (no model instances).

`entitlement_rows` is the large one (10,000s of rows at scale): one query with the catalogue
columns joined in SQL and returned as tuples, so a rebuild costs a join and a loop, not tens of
thousands of model instances. Pools are few; they go through the model for the deliverable
formula (capacity.deliverable via Pool.breakdown), which must stay the one formula.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Q

from entitlements.models import Entitlement, Pool
from entitlements.models.supply import as_cu


class EntRow(NamedTuple):
    pk: int
    uuid: Any
    tenant: str
    project: str | None
    model: str
    region: str
    traffic_class: str
    pool_id: int
    starts_at: datetime
    ends_at: datetime | None
    cu: Any  # Decimal
    max_prompt_tokens: int
    max_output_tokens: int
    output_p95: int
    max_concurrency: int
    ttft_p99_ms: int
    tpot_p99_ms: int
    overage: str
    borrowing_limit_cu: Any  # Decimal
    r_wt_per_s: float
    w_out: float
    w_cached: float
    may_borrow: bool
    counts_as_sold: bool


ENT_COLUMNS = (
    "pk", "uuid", "tenant__slug", "project__slug", "model__slug", "region__slug", "traffic_class_id", "pool_id",
    "starts_at", "ends_at", "cu", "max_prompt_tokens", "max_output_tokens", "output_p95", "max_concurrency",
    "ttft_p99_ms", "tpot_p99_ms", "overage", "borrowing_limit_cu", "model__r_wt_per_s", "model__w_out",
    "model__w_cached", "traffic_class__may_borrow", "traffic_class__counts_as_sold",
)  # fmt: skip


def entitlement_rows(t: datetime) -> list[EntRow]:
    """Every entitlement not revoked and not ended at t (active now or starting later), by pk."""
    qs = (
        Entitlement.objects.filter(revoked_at__isnull=True)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))
        .order_by("pk")
        .values_list(*ENT_COLUMNS)
    )
    return [EntRow._make(r) for r in qs]


class PoolBase(NamedTuple):
    pool_id: int
    slug: str
    model: str
    region: str
    r_wt_per_s: float
    deliverable_cu: float


def pool_rows() -> list[PoolBase]:
    pools = Pool.objects.select_related("model", "region", "operating_point__model").prefetch_related("zones")
    return [
        PoolBase(p.pk, p.slug, p.model.slug, p.region.slug, p.model.r_wt_per_s, float(as_cu(p.breakdown().deliverable)))
        for p in pools
    ]


def health_rows(pool_ids: list[int]) -> dict[int, tuple[int, int] | None]:
    """Operator override, else the newest fleet sample from telemetry, else None (healthy)."""
    from admission.models import PoolHealthOverride

    overrides = {
        o["pool_id"]: (o["replicas_healthy"], o["replicas_total"])
        for o in PoolHealthOverride.objects.values("pool_id", "replicas_healthy", "replicas_total")
    }
    return {pid: pool_health(pid, overrides) for pid in pool_ids}


def pool_health(pool_id: int, overrides: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    if pool_id in overrides:
        return overrides[pool_id]
    try:
        from telemetry.selectors import latest_pool_health
    except (ImportError, AttributeError):
        return None
    got = latest_pool_health(pool_id)
    return (int(got[0]), int(got[1])) if got else None
