"""Admission events as sources report them, and the dedup key each stored event keeps.

Events keep catalogue references as slugs, not foreign keys: the serving path speaks slugs, an
event must survive a catalogue rename, and ingest stays one INSERT without lookups per row.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class Decision(models.TextChoices):
    ADMIT = "admit", "Admitted"
    THROTTLE = "throttle", "Throttled"
    COMPLETE = "complete", "Completed"


class AdmissionEvent(models.Model):
    """One admission decision or one settled reservation, as reported by a source (docs/contract.md §6)."""

    source = models.CharField(max_length=64)
    event_id = models.CharField(max_length=160)
    ts = models.DateTimeField()
    received_at = models.DateTimeField(help_text="when ingest stored it: ingest lag = received_at − ts")
    tenant = models.CharField(max_length=64)
    project = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=64)
    region = models.CharField(max_length=64)
    traffic_class = models.CharField(max_length=16)
    entitlement = models.UUIDField(null=True, blank=True)
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.CharField(max_length=32, blank=True, default="")
    source_kind = models.CharField(max_length=16, blank=True, default="")
    estimated_wt = models.FloatField(default=0)
    actual_wt = models.FloatField(null=True, blank=True)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_prompt_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    ttft_ms = models.FloatField(null=True, blank=True)
    e2e_ms = models.FloatField(null=True, blank=True)
    slo_met = models.BooleanField(null=True, blank=True)
    status = models.CharField(max_length=16, blank=True, default="")
    in_flight = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="on an admit: the scope's reservations in flight right after it (the store's count)",
    )
    served_from = models.CharField(
        max_length=80,
        null=True,
        blank=True,
        help_text="a spilled request: the pool that served it, as admission answered (issue 36)",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(prompt_tokens__gte=0) & Q(cached_prompt_tokens__gte=0) & Q(output_tokens__gte=0),
                name="event_tokens_nonneg",
            ),
        ]
        # No secondary indexes on purpose: every read goes to the rollups, and each index on this
        # write-heavy table costs ingest throughput. Dedup is EventKey's primary key, not this table's:
        # on PostgreSQL the table is partitioned by day on ts (telemetry.partitions), its primary key
        # is (id, ts) there, and a unique index on a partitioned table has to include ts.

    def __str__(self) -> str:
        return f"{self.source}:{self.event_id} {self.decision}"


class EventKey(models.Model):
    """The dedup key of every stored event: (source, event_id) unique across all of the events' partitions.

    Kept longer than the events (TELEMETRY_DEDUP_RETENTION_DAYS ≥ the events' retention + the plausible
    timestamp window), so an event is either still known here or already refused by ts validation.
    `ts` is the event's own time: retention deletes keys by it (a BRIN index on PostgreSQL).
    """

    # The key itself is the primary key: no identity column and no second unique index to fill per key
    # (ingest's largest server cost). Event ids are the sources' own, unique per source only.
    pk = models.CompositePrimaryKey("source", "event_id")
    source = models.CharField(max_length=64)
    event_id = models.CharField(max_length=160)
    ts = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.source}:{self.event_id}"
