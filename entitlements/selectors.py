"""Reads. Tenant-facing queries go through `visible_to(user)`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from entitlements import roles
from entitlements.models import Entitlement, Pool
from entitlements.models.supply import as_cu


def entitlements_visible_to(user: Any) -> QuerySet[Entitlement]:
    qs = Entitlement.objects.select_related("tenant", "project", "model", "region", "pool", "traffic_class")
    r = roles.roles_of(user)
    if r & roles.STAFF_ROLES or roles.GATEWAY in r:
        return qs
    tenant = roles.tenant_of(user)
    if tenant is None:
        return qs.none()
    return qs.filter(tenant=tenant)


def active_at(qs: QuerySet[Entitlement], t: datetime) -> QuerySet[Entitlement]:
    return qs.filter(revoked_at__isnull=True, starts_at__lte=t).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))


def overlapping(qs: QuerySet[Entitlement], start: datetime, end: datetime | None) -> QuerySet[Entitlement]:
    qs = qs.filter(revoked_at__isnull=True).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=start))
    if end is not None:
        qs = qs.filter(starts_at__lt=end)
    return qs


def sold_entitlements(pool: Pool) -> QuerySet[Entitlement]:
    return Entitlement.objects.filter(pool=pool, traffic_class__counts_as_sold=True)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime | None


def peak_sold(rows: Iterable[tuple[datetime, datetime | None, Decimal]], window: Window) -> Decimal:
    """Max over the window of Σ CU active at t. sold(t) is a step function, so its maximum is
    reached at the window start or at some entitlement's start inside the window."""
    rows = list(rows)
    instants = {window.start} | {s for s, _, _ in rows if s > window.start and (window.end is None or s < window.end)}
    best = Decimal(0)
    for t in instants:
        total = sum((cu for s, e, cu in rows if s <= t and (e is None or e > t)), Decimal(0))
        best = max(best, total)
    return best


def pool_sold_peak(pool: Pool, window: Window, *, exclude_pk: int | None = None) -> Decimal:
    qs = overlapping(sold_entitlements(pool), window.start, window.end)
    if exclude_pk is not None:
        qs = qs.exclude(pk=exclude_pk)
    return peak_sold(qs.values_list("starts_at", "ends_at", "cu"), window)


def pool_sold_now(pool: Pool, at: datetime | None = None) -> Decimal:
    """Σ CU sold at one instant (the race tests' oversell check reads this)."""
    t = at or timezone.now()
    return pool_sold_peak(pool, Window(t, t + timedelta(microseconds=1)))


def pools_with_totals(at: datetime | None = None) -> list[dict[str, Any]]:
    """Every pool with physical, deliverable, sold and headroom now: the operator's main table."""
    t = at or timezone.now()
    pools = list(
        Pool.objects.select_related("model", "region", "accelerator", "operating_point__model").prefetch_related(
            "zones__zone", "reserves_held__protected_pool", "reserves_held__protected_zone"
        )
    )
    sold: dict[int, Decimal] = {}
    for pool_id, cu in active_at(Entitlement.objects.filter(traffic_class__counts_as_sold=True), t).values_list(
        "pool_id", "cu"
    ):
        sold[pool_id] = sold.get(pool_id, Decimal(0)) + cu
    out = []
    for p in pools:
        b = p.breakdown()
        deliverable = as_cu(b.deliverable)
        s = sold.get(p.pk, Decimal(0))
        out.append(
            {
                "pool": p,
                "breakdown": b,
                "physical_cu": as_cu(b.physical),
                "deliverable_cu": deliverable,
                "sold_cu": s,
                "headroom_cu": deliverable - s,
            }
        )
    return out
