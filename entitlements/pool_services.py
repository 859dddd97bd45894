"""Operator writes to a pool's shape: deduction percentages, failure policy, zone replicas.

Same discipline as entitlements.services: under the pool lock (and the locks of reserve-linked
pools), refuse a change that would leave the pool delivering less than it has sold from now on.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from entitlements import reserve_rules
from entitlements.models import Pool, PoolZone, Zone
from entitlements.models.supply import as_cu, validate_failure_policy
from entitlements.pool_locks import lock_pools, pool_refresh
from entitlements.selectors import Window, pool_sold_peak

PCT_FIELDS = ("maintenance_pct", "safety_pct", "fragmentation_pct")


def _validate(changes: dict[str, Any]) -> None:
    for name, value in changes.items():
        if name in PCT_FIELDS:
            if not 0 <= float(value) <= 100:
                raise ValidationError({name: "must be within 0–100"})
        elif name == "failure_policy":
            try:
                validate_failure_policy(value)
            except ValidationError as exc:
                raise ValidationError({name: exc.messages}) from None
        else:
            raise ValidationError({name: "cannot be changed here"})


@transaction.atomic
def pool_update(*, pool: Pool, zones: list[tuple[Zone, int]] | None = None, **changes: Any) -> Pool:
    """Apply `changes` (PCT_FIELDS, failure_policy) and `zones` [(zone, replicas)] to `pool`.

    The error names the first field that was changed: together they moved the deliverable.
    """
    _validate(changes)
    locked = lock_pools({pool.pk})[pool.pk]
    for name, value in changes.items():
        setattr(locked, name, value)
    if changes:
        locked.save(update_fields=list(changes))
    for zone, replicas in zones or []:
        if zone.region_id != locked.region_id:
            raise ValidationError({"zones": f"zone {zone.slug} is not in the pool's region"})
        if replicas < 0:
            raise ValidationError({"zones": f"zone {zone.slug}: replicas must be ≥ 0"})
        PoolZone.objects.update_or_create(pool=locked, zone=zone, defaults={"replicas": replicas})
    field = next(iter(changes), "zones")
    # A zone reserve held here counts only replicas outside its zone: fewer of them must still hold it.
    reserve_rules.check_all_zone_rooms(locked, "zones")
    # Reserves held here must still fit in the new physical size; say so before the
    # database's check constraint refuses the refresh with an IntegrityError.
    probe = Pool.objects.select_related("operating_point__model").get(pk=locked.pk)
    physical = as_cu(probe.breakdown().physical)
    if locked.reserve_held_cu > physical:
        raise ValidationError(
            {
                field: f"pool {locked.slug} holds {locked.reserve_held_cu} CU of reserves; physical would be {physical} CU"
            }
        )
    fresh = pool_refresh(locked)
    deliverable = fresh.deliverable_cu
    sold = pool_sold_peak(fresh, Window(timezone.now(), None))
    if sold > deliverable:
        raise ValidationError(
            {
                field: f"pool {fresh.slug} would deliver {deliverable} CU but has sold {sold} CU "
                f"from now on ({sold - deliverable} CU short)"
            }
        )
    return fresh
