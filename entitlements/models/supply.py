"""Supply: pools of replicas over zones, and failover reserves between them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q

from capacity.deliverable import Deliverable, PoolSupply, deliverable
from capacity.failure import parse_failure_policy
from entitlements.models.catalogue import Accelerator, OperatingPoint, Region, ServedModel, Zone
from entitlements.models.prices import Term, validate_term

CU: dict[str, Any] = {"max_digits": 14, "decimal_places": 3}


def as_cu(value: object) -> Decimal:
    """A CU figure at the precision it is stored and compared in (3 decimals)."""
    return Decimal(str(value)).quantize(Decimal("0.001"))


def validate_failure_policy(value: str) -> None:
    try:
        parse_failure_policy(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


class Pool(models.Model):
    """One model served in one region on one accelerator type.

    `physical_cu` and `reserve_held_cu` are kept by `entitlements.pool_locks.pool_refresh` under the
    pool's row lock so the database itself can refuse reserves larger than the pool.
    """

    slug = models.SlugField(max_length=80, unique=True)
    model = models.ForeignKey(ServedModel, on_delete=models.PROTECT, related_name="pools")
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="pools")
    accelerator = models.ForeignKey(Accelerator, on_delete=models.PROTECT, related_name="pools")
    operating_point = models.ForeignKey(OperatingPoint, on_delete=models.PROTECT, related_name="pools")
    accelerators_per_replica = models.PositiveIntegerField()
    maintenance_pct = models.FloatField(default=5)
    safety_pct = models.FloatField(default=5)
    fragmentation_pct = models.FloatField(default=2)
    failure_policy = models.CharField(max_length=32, default="zone", validators=[validate_failure_policy])
    # The commitment the platform holds on this pool's accelerators: its $ per CU-hour reads the price
    # list's row for this term (docs/contract.md §10).
    term = models.CharField(max_length=12, choices=Term.choices, default=Term.ON_DEMAND, validators=[validate_term])
    physical_cu = models.DecimalField(**CU, default=Decimal(0), editable=False)
    reserve_held_cu = models.DecimalField(**CU, default=Decimal(0), editable=False)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(reserve_held_cu__lte=F("physical_cu")), name="pool_reserve_within_physical"
            ),
            models.CheckConstraint(
                condition=Q(maintenance_pct__gte=0)
                & Q(maintenance_pct__lte=100)
                & Q(safety_pct__gte=0)
                & Q(safety_pct__lte=100)
                & Q(fragmentation_pct__gte=0)
                & Q(fragmentation_pct__lte=100),
                name="pool_pcts_in_range",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        op = self.operating_point if self.operating_point_id else None
        if op is not None:
            errors = {}
            if self.model_id and op.model_id != self.model_id:
                errors["operating_point"] = "the operating point measures another model"
            if self.accelerator_id and op.accelerator_id != self.accelerator_id:
                errors["operating_point"] = "the operating point measures another accelerator"
            if self.accelerators_per_replica and op.accelerators_per_replica != self.accelerators_per_replica:
                errors["accelerators_per_replica"] = (
                    f"the operating point was measured with {op.accelerators_per_replica} per replica"
                )
            if errors:
                raise ValidationError(errors)

    @property
    def cu_per_replica(self) -> float:
        return self.operating_point.goodput_cu

    def replicas_per_zone(self) -> tuple[int, ...]:
        return tuple(z.replicas for z in self.zones.all())

    @property
    def replicas(self) -> int:
        return sum(self.replicas_per_zone())

    def supply(self) -> PoolSupply:
        return PoolSupply(
            replicas_per_zone=self.replicas_per_zone(),
            cu_per_replica=self.cu_per_replica,
            maintenance_pct=self.maintenance_pct,
            safety_pct=self.safety_pct,
            fragmentation_pct=self.fragmentation_pct,
            reserve_held_cu=float(self.reserve_held_cu),
        )

    def breakdown(self) -> Deliverable:
        return deliverable(self.supply())

    @property
    def deliverable_cu(self) -> Decimal:
        """Deliverable capacity to the CU precision every headroom check compares in."""
        return as_cu(self.breakdown().deliverable)


class PoolZone(models.Model):
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="zones")
    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, related_name="pool_zones")
    replicas = models.PositiveIntegerField()

    class Meta:
        ordering = ["zone__slug"]
        constraints = [models.UniqueConstraint(fields=["pool", "zone"], name="poolzone_unique")]

    def clean(self) -> None:
        if self.pool_id and self.zone_id and self.zone.region_id != self.pool.region_id:
            raise ValidationError({"zone": "the zone is not in the pool's region"})

    def __str__(self) -> str:
        return f"{self.pool.slug}@{self.zone.slug}"


class FailoverReserve(models.Model):
    """Capacity held idle in `host_pool` to stand in for one other pool of the same model: for the
    whole of it, or (with `protected_zone`) for the part of it in one zone.

    A zone reserve names its pool, so one reserve never stands for two pools and is listed once.
    The database keeps a reserve to its host's model and a zone to its pool's region (triggers,
    migration 0009); the unique constraints stop one host holding two reserves for one scope;
    `Pool.pool_reserve_within_physical` stops the sum from exceeding the host. That a zone reserve
    is held by host replicas outside the zone it protects is checked by the services, which see
    every change to the host's zones.
    """

    host_pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="reserves_held")
    protected_pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="reserves_protecting")
    protected_zone = models.ForeignKey(
        Zone,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="reserves_protecting",
        help_text="empty: the whole pool; set: the protected pool's replicas in this zone",
    )
    cu = models.DecimalField(**CU)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["host_pool__slug", "pk"]
        constraints = [
            models.CheckConstraint(condition=~Q(protected_pool=F("host_pool")), name="reserve_not_self"),
            models.CheckConstraint(condition=Q(cu__gt=0), name="reserve_cu_positive"),
            models.UniqueConstraint(
                fields=["host_pool", "protected_pool"],
                condition=Q(protected_zone__isnull=True),
                name="reserve_unique_pool_scope",
            ),
            models.UniqueConstraint(
                fields=["host_pool", "protected_pool", "protected_zone"],
                condition=Q(protected_zone__isnull=False),
                name="reserve_unique_zone_scope",
            ),
        ]

    @property
    def scope(self) -> str:
        pool = f"pool {self.protected_pool.slug}"
        return f"{pool} in zone {self.protected_zone.slug}" if self.protected_zone is not None else pool

    def __str__(self) -> str:
        return f"{self.cu} CU in {self.host_pool.slug} for {self.scope}"
