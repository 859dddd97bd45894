"""What a failover reserve may protect and how much its host can hold for it (issue 12.8).

A reserve re-lands one pool's traffic on its host when that pool (or its part in one zone)
fails, so: the host serves the same model; a zone reserve names the one pool it stands for;
and when zone Z fails the host loses its own replicas in Z too, so only host replicas outside
Z count toward the reserves it holds for Z.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Sum

from entitlements.models import FailoverReserve, Pool, PoolZone
from entitlements.models.supply import as_cu


def resolve_protected_pool(host: Pool, protected_pool: Pool | None, protected_zone: Any) -> Pool:
    """The pool a reserve stands for; a zone alone names it when exactly one other pool of the
    host's model has replicas there. 400s name the field at fault."""
    if protected_pool is None and protected_zone is None:
        raise ValidationError({"protected_pool": "a reserve protects one pool, or one pool's replicas in a zone"})
    if protected_pool is None:
        candidates = list(
            Pool.objects.filter(model_id=host.model_id, zones__zone=protected_zone, zones__replicas__gt=0)
            .exclude(pk=host.pk)
            .distinct()
            .order_by("slug")
        )
        if len(candidates) != 1:
            found = ", ".join(p.slug for p in candidates) or "none"
            raise ValidationError(
                {
                    "protected_pool": f"zone {protected_zone.slug} holds replicas of {len(candidates)} other pools "
                    f"serving {host.model.slug} ({found}): name the one this reserve stands for"
                }
            )
        protected_pool = candidates[0]
    if protected_pool.pk == host.pk:
        raise ValidationError({"protected_pool": "a pool cannot hold a reserve for itself"})
    if protected_pool.model_id != host.model_id:
        raise ValidationError(
            {
                "protected_pool": f"pool {protected_pool.slug} serves {protected_pool.model.slug}; "
                f"{host.slug} serves {host.model.slug} and cannot re-land its traffic"
            }
        )
    if (
        protected_zone is not None
        and not PoolZone.objects.filter(pool=protected_pool, zone=protected_zone, replicas__gt=0).exists()
    ):
        raise ValidationError(
            {"protected_zone": f"pool {protected_pool.slug} has no replicas in zone {protected_zone.slug}"}
        )
    return protected_pool


def cu_outside_zone(host: Pool, zone_id: int) -> Decimal:
    """The host's physical CU on replicas outside one zone: what survives that zone's loss."""
    outside = sum(z.replicas for z in PoolZone.objects.filter(pool=host).exclude(zone_id=zone_id))
    return as_cu(outside * host.cu_per_replica)


def check_zone_room(host: Pool, zone: Any, *, replacing: FailoverReserve | None = None, adding: Decimal) -> None:
    """Refuse when the reserves `host` holds for `zone` would exceed its capacity outside it."""
    held = FailoverReserve.objects.filter(host_pool=host, protected_zone=zone)
    if replacing is not None:
        held = held.exclude(pk=replacing.pk)
    total = (held.aggregate(s=Sum("cu"))["s"] or Decimal(0)) + adding
    room = cu_outside_zone(host, zone.pk)
    if total > room:
        raise ValidationError(
            {
                "cu": f"pool {host.slug} has {room} CU on replicas outside zone {zone.slug}; "
                f"reserves for that zone would need {total} CU (its replicas in the zone fail with it)"
            }
        )


def check_all_zone_rooms(host: Pool, field: str) -> None:
    """After the host's zones change: every zone reserve it holds must still fit outside its zone."""
    zones = FailoverReserve.objects.filter(host_pool=host, protected_zone__isnull=False).select_related(
        "protected_zone"
    )
    for zone in {r.protected_zone for r in zones}:
        try:
            check_zone_room(host, zone, adding=Decimal(0))
        except ValidationError as exc:
            raise ValidationError({field: exc.message_dict["cu"]}) from None
