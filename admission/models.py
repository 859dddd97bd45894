"""Admission's own rows: operator health overrides and measured reclaims.

Reservations themselves live in the enforcement store (Redis or in-process), never here: the
serving path does not write to the database.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class PoolHealthOverride(models.Model):
    """An operator's statement of a pool's healthy replicas; wins over telemetry while it exists."""

    pool = models.OneToOneField("entitlements.Pool", on_delete=models.CASCADE, related_name="health_override")
    replicas_healthy = models.PositiveIntegerField()
    replicas_total = models.PositiveIntegerField()
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(replicas_total__gt=0), name="health_total_positive"),
            models.CheckConstraint(condition=Q(replicas_healthy__lte=F("replicas_total")), name="health_within_total"),
        ]

    def __str__(self) -> str:
        return f"{self.pool_id}: {self.replicas_healthy}/{self.replicas_total}"

    @property
    def ratio(self) -> float:
        return self.replicas_healthy / self.replicas_total


class ReclaimEvent(models.Model):
    """A lender came back and borrowers on the pool were cut off: how long that took."""

    pool = models.ForeignKey("entitlements.Pool", on_delete=models.CASCADE, related_name="reclaim_events")
    at = models.DateTimeField()
    latency_ms = models.FloatField(help_text="from the lender's return to the first RECLAIMED borrower")
    borrowers_cut = models.PositiveIntegerField(help_text="borrowing scopes refused with RECLAIMED")

    class Meta:
        ordering = ["-at"]
        constraints = [models.CheckConstraint(condition=Q(latency_ms__gte=0), name="reclaim_latency_nonneg")]

    def __str__(self) -> str:
        return f"pool {self.pool_id} reclaimed in {self.latency_ms:.1f} ms ({self.borrowers_cut} cut)"


class SnapshotVersion(models.Model):
    """One row (id 1): change counters per part of the admission snapshot, bumped by database
    triggers on every write to the tables that part reads (admission.snapshot_triggers)."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    entitlements = models.BigIntegerField(default=0)
    supply = models.BigIntegerField(default=0)
    health = models.BigIntegerField(default=0)
    catalogue = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"snapshot counters {self.entitlements}/{self.supply}/{self.health}/{self.catalogue}"


class CarriedUsage(models.Model):
    """Usage carried into a scope's period budget from another gateway (`import_atlas --apply`).

    The ledger a second import compares with (Atlas's figure unchanged: nothing to carry), and the
    hand-off on the embedded default: the command's process has no access to the web server's
    in-process store, so it writes these rows and the server adds each row's `delta` to its bucket
    when its snapshot check sees them (admission.atlas_carry). On Redis the command adds it itself.
    """

    bucket = models.CharField(max_length=500, help_text="the period bucket's store key, '<stem>:<period id>'")
    period_end = models.FloatField(help_text="Unix time the period ends: a server applies current periods only")
    carried = models.FloatField(help_text="the other gateway's total for the period as of this import")
    delta = models.FloatField(help_text="what this import adds: carried minus the previous row's carried")
    source = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["bucket", "id"], name="carried_bucket")]

    def __str__(self) -> str:
        return f"{self.bucket}: {self.carried:g} (+{self.delta:g})"


class SnapshotChange(models.Model):
    """The change log the snapshot's incremental refresh reads (admission.snapshot_triggers): the scope
    (tenant, project, model, region, class ids) of every entitlement row written, appended by the same
    triggers that bump the counters, in commit order; `everything` marks a write that moves every
    scope (a tenant, project or class row, or a bulk write), which a reader answers with a full rebuild."""

    id = models.BigAutoField(primary_key=True)
    everything = models.BooleanField(default=False)
    tenant_id = models.BigIntegerField(null=True)
    project_id = models.BigIntegerField(null=True)
    model_id = models.BigIntegerField(null=True)
    region_id = models.BigIntegerField(null=True)
    traffic_class = models.CharField(max_length=16, null=True)

    def __str__(self) -> str:
        return f"change {self.id}"
