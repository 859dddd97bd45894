"""The locks and the headroom check every write to sold capacity runs under (grants, amendments,
scope moves, failover reserves, a pool's supply): pools locked in pk order with every pool a reserve
links to them, their stored totals recomputed, and the oversell check over a window.
"""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db.models import Q, Sum

from entitlements.models import FailoverReserve, Pool
from entitlements.models.supply import as_cu
from entitlements.selectors import Window, pool_sold_peak


class OversellError(ValidationError):
    """A write that would make sold(t) exceed deliverable somewhere in its window."""


class ScopePoolConflict(OversellError):
    """docs/contract.md §5, one scope one pool: the grant does not fit the pool its scope lives in (409)."""

    http_status = 409


def lock_pools(pool_ids: set[int]) -> dict[int, Pool]:
    """Lock these pools plus every pool linked to them by a failover reserve, in pk order.

    Ordered locking avoids deadlocks; including reserve-linked pools serialises a grant with a
    change to a reserve that moves the same pool's deliverable capacity.
    """
    ids = set(pool_ids)
    linked = FailoverReserve.objects.filter(Q(host_pool_id__in=ids) | Q(protected_pool_id__in=ids))
    for host, protected in linked.values_list("host_pool_id", "protected_pool_id"):
        ids.add(host)
        if protected:
            ids.add(protected)
    locked = Pool.objects.select_for_update().filter(pk__in=sorted(ids)).order_by("pk")
    return {p.pk: p for p in locked}


def pool_refresh(pool: Pool) -> Pool:
    """Recompute the stored physical and reserve totals (call under the pool's lock)."""
    pool = Pool.objects.select_related("operating_point__model").get(pk=pool.pk)
    physical = as_cu(pool.breakdown().physical)
    held = FailoverReserve.objects.filter(host_pool=pool).aggregate(s=Sum("cu"))["s"] or Decimal(0)
    Pool.objects.filter(pk=pool.pk).update(physical_cu=physical, reserve_held_cu=held)
    pool.physical_cu, pool.reserve_held_cu = physical, held
    return pool


def check_headroom(
    pool: Pool, window: Window, extra_cu: Decimal, *, exclude_pk: int | None = None, peak: Decimal | None = None
) -> None:
    """`peak`: the pool's sold peak over `window` when the caller read it under the same lock (no second read)."""
    deliverable = pool.deliverable_cu
    if peak is None:
        peak = pool_sold_peak(pool, window, exclude_pk=exclude_pk)
    if peak + extra_cu > deliverable:
        left = max(Decimal(0), deliverable - peak)
        raise OversellError(
            {
                "cu": f"pool {pool.slug} has {left} CU of headroom left in that window "
                f"(deliverable {deliverable}, already sold {peak}); {extra_cu} CU would oversell it"
            }
        )
