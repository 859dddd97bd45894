"""Writes to the source of truth. Every grant, amendment and revocation checks headroom over
its whole window under row locks on every pool it touches, and is captured by the history
triggers with who and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from entitlements.history import history_context
from entitlements.models import Entitlement, FailoverReserve, Pool, Region, ServedModel, TrafficClass
from entitlements.models.supply import as_cu
from entitlements.selectors import Window, pool_sold_peak


class OversellError(ValidationError):
    """A write that would make sold(t) exceed deliverable somewhere in its window."""


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


def _check_headroom(pool: Pool, window: Window, extra_cu: Decimal, *, exclude_pk: int | None = None) -> None:
    deliverable = pool.deliverable_cu
    peak = pool_sold_peak(pool, window, exclude_pk=exclude_pk)
    if peak + extra_cu > deliverable:
        left = max(Decimal(0), deliverable - peak)
        raise OversellError(
            {
                "cu": f"pool {pool.slug} has {left} CU of headroom left in that window "
                f"(deliverable {deliverable}, already sold {peak}); {extra_cu} CU would oversell it"
            }
        )


@dataclass(frozen=True)
class Envelope:
    max_prompt_tokens: int
    max_output_tokens: int
    prompt_p50: int
    prompt_p95: int
    output_p50: int
    output_p95: int
    max_concurrency: int
    ttft_p99_ms: int
    tpot_p99_ms: int
    streaming: bool = True


def _validate_window(starts_at: datetime, ends_at: datetime | None) -> None:
    if ends_at is not None and ends_at <= starts_at:
        raise ValidationError({"ends_at": "must be after starts_at"})


@transaction.atomic
def entitlement_grant(
    *,
    actor: Any,
    reason: str,
    tenant: Any,
    model: ServedModel,
    region: Region,
    traffic_class: str,
    cu: Decimal | float | str,
    starts_at: datetime,
    ends_at: datetime | None,
    envelope: Envelope,
    project: Any = None,
    pool: Pool | None = None,
    overage: str = Entitlement.Overage.THROTTLE,
    borrowing_limit_cu: Decimal | float | str = 0,
) -> Entitlement:
    cu_d = as_cu(cu)
    if cu_d <= 0:
        raise ValidationError({"cu": "must be greater than 0"})
    _validate_window(starts_at, ends_at)
    tc = TrafficClass.objects.filter(slug=traffic_class).first()
    if tc is None:
        raise ValidationError({"traffic_class": f"unknown traffic class '{traffic_class}'"})
    candidates = [pool] if pool is not None else list(Pool.objects.filter(model=model, region=region).order_by("pk"))
    if not candidates:
        raise ValidationError({"region": f"no pool serves {model.slug} in {region.slug}"})
    locked = lock_pools({p.pk for p in candidates})
    window = Window(starts_at, ends_at)
    chosen: Pool | None = None
    last_error: OversellError | None = None
    for cand in candidates:
        p = locked[cand.pk]
        if p.model_id != model.pk or p.region_id != region.pk:
            raise ValidationError({"pool": f"pool {p.slug} does not serve {model.slug} in {region.slug}"})
        if not tc.counts_as_sold:
            chosen = p
            break
        try:
            _check_headroom(p, window, cu_d)
        except OversellError as exc:
            last_error = exc
            continue
        chosen = p
        break
    if chosen is None:
        assert last_error is not None
        raise last_error
    ent = Entitlement(
        tenant=tenant,
        project=project,
        model=model,
        region=region,
        pool=chosen,
        traffic_class=tc,
        starts_at=starts_at,
        ends_at=ends_at,
        cu=cu_d,
        overage=overage,
        borrowing_limit_cu=as_cu(borrowing_limit_cu),
        **envelope.__dict__,
    )
    ent.full_clean()
    with history_context(actor=actor, reason=reason):
        ent.save()
    return ent


# The workload envelope's fields, in one place: the API, the snapshot and launch requests read this.
ENVELOPE_FIELDS: tuple[str, ...] = tuple(Envelope.__dataclass_fields__)
AMENDABLE = {"cu", "starts_at", "ends_at", "overage", "borrowing_limit_cu", *ENVELOPE_FIELDS}


@transaction.atomic
def entitlement_amend(*, actor: Any, reason: str, entitlement: Entitlement, **changes: Any) -> Entitlement:
    unknown = set(changes) - AMENDABLE
    if unknown:
        name = sorted(unknown)[0]
        raise ValidationError({name: "cannot be amended; revoke and grant instead"})
    if not reason:
        raise ValidationError({"reason": "say why the entitlement changes"})
    locked = lock_pools({entitlement.pool_id})
    ent = Entitlement.objects.select_for_update().select_related("traffic_class").get(pk=entitlement.pk)
    if ent.revoked_at is not None:
        raise ValidationError({"entitlement": "a revoked entitlement cannot be amended"})
    for k, v in changes.items():
        setattr(ent, k, as_cu(v) if k in ("cu", "borrowing_limit_cu") else v)
    _validate_window(ent.starts_at, ent.ends_at)
    if ent.traffic_class.counts_as_sold:
        _check_headroom(locked[ent.pool_id], Window(ent.starts_at, ent.ends_at), ent.cu, exclude_pk=ent.pk)
    ent.version += 1
    ent.full_clean()
    with history_context(actor=actor, reason=reason):
        ent.save()
    return ent


@transaction.atomic
def entitlement_revoke(*, actor: Any, reason: str, entitlement: Entitlement, at: datetime | None = None) -> Entitlement:
    if not reason:
        raise ValidationError({"reason": "say why the entitlement is revoked"})
    ent = Entitlement.objects.select_for_update().get(pk=entitlement.pk)
    if ent.revoked_at is not None:
        return ent
    ent.revoked_at = at or timezone.now()
    ent.version += 1
    with history_context(actor=actor, reason=reason):
        ent.save(update_fields=["revoked_at", "version", "updated_at"])
    return ent


@transaction.atomic
def reserve_set(
    *,
    host_pool: Pool,
    cu: Decimal | float | str,
    protected_pool: Pool | None = None,
    protected_zone: Any = None,
    note: str = "",
) -> FailoverReserve | None:
    """Create, resize or (cu = 0) remove the reserve `host_pool` holds for one scope.

    Refused when the host's deliverable capacity would fall below what it has already sold.
    """
    if (protected_pool is None) == (protected_zone is None):
        raise ValidationError({"protected_pool": "a reserve protects exactly one pool or one zone"})
    cu_d = as_cu(cu)
    if cu_d < 0:
        raise ValidationError({"cu": "must be ≥ 0"})
    ids = {host_pool.pk} | ({protected_pool.pk} if protected_pool else set())
    locked = lock_pools(ids)
    host = pool_refresh(locked[host_pool.pk])
    scope = {"protected_pool": protected_pool} if protected_pool else {"protected_zone": protected_zone}
    existing = FailoverReserve.objects.filter(host_pool=host, **scope).first()
    delta = cu_d - (existing.cu if existing else Decimal(0))
    new_held = host.reserve_held_cu + delta
    if new_held > host.physical_cu:
        raise ValidationError(
            {"cu": f"pool {host.slug} would hold {new_held} CU of reserves but has only {host.physical_cu} CU physical"}
        )
    if delta > 0:
        host.reserve_held_cu = new_held
        deliverable = host.deliverable_cu
        peak = pool_sold_peak(host, Window(timezone.now(), None))
        if peak > deliverable:
            raise OversellError(
                {
                    "cu": f"pool {host.slug} has sold {peak} CU; a {cu_d} CU reserve would leave "
                    f"only {deliverable} CU deliverable"
                }
            )
    if cu_d == 0:
        if existing:
            existing.delete()
        pool_refresh(host)
        return None
    if existing:
        existing.cu = cu_d
        existing.note = note or existing.note
        existing.save(update_fields=["cu", "note"])
        res = existing
    else:
        res = FailoverReserve(host_pool=host, cu=cu_d, note=note, **scope)
        res.full_clean()
        res.save()
    pool_refresh(host)
    return res
