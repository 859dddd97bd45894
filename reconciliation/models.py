"""Reconciliation (issue 17.2): what should change, with its evidence, written by a run.

A run reads what the statement reads (the rollups) for a trailing window and writes findings per
entitlement; people accept or dismiss them, each act recorded with who and why (FindingAct, append
only, like the entitlement history). "Platform owes" findings put the pool in review (PoolReview),
which operators see. ForecastAccuracy rows hold, for every past forecast run and series, the realised
demand against its P50 and P90.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from entitlements.models import Entitlement, Pool, Tenant
from forecasting.models import ForecastRun, ForecastSeries
from runs.models import ClaimedRun


class ReconciliationRun(ClaimedRun):
    """A run over a window, claimed like a forecast run (runs.claims): a worker killed mid-run stops
    checkpointing, and the redelivered task takes the run over after RECONCILE_RUN_STALE_AFTER_S."""

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Run now"
        SCHEDULE = "schedule", "Schedule"

    STALE_AFTER_SETTING = "RECONCILE_RUN_STALE_AFTER_S"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField(help_text="the last whole hour when the run was asked for")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    entitlements_read = models.PositiveIntegerField(default=0)
    findings_written = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"reconciliation {self.id} {self.status}"


class Finding(models.Model):
    class Kind(models.TextChoices):
        RIGHT_SIZE_DOWN = "right_size_down", "Right-size down"
        GROW = "grow", "Grow"
        ENVELOPE_DRIFT = "envelope_drift", "Envelope drift"
        PLATFORM_OWES = "platform_owes", "Platform owes"

    class State(models.TextChoices):
        OPEN = "open", "Open"
        ACCEPTED = "accepted", "Accepted"
        DISMISSED = "dismissed", "Dismissed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(ReconciliationRun, on_delete=models.SET_NULL, null=True, related_name="findings")
    entitlement = models.ForeignKey(Entitlement, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=12, choices=State.choices, default=State.OPEN)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    evidence = models.JSONField(default=dict, help_text="the figures the recommendation rests on")
    action = models.TextField(help_text="the recommended action, in words")
    cu_delta = models.DecimalField(max_digits=12, decimal_places=3, null=True, blank=True)
    recommended = models.JSONField(default=dict, help_text="the numbers of the action: new CU, new envelope, hours")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    acted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    acted_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # a re-run refreshes the open finding of a kind rather than adding a second one
            models.UniqueConstraint(
                fields=["entitlement", "kind"], condition=Q(state="open"), name="finding_one_open_per_kind"
            ),
        ]
        indexes = [models.Index(fields=["state", "-created_at"], name="finding_state_created")]

    def __str__(self) -> str:
        return f"{self.kind} {self.entitlement_id} {self.state}"


class FindingAct(models.Model):
    """Who did what to a finding and why; only ever inserted."""

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="acts")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    act = models.CharField(max_length=16, help_text="found, refreshed, accepted, dismissed")
    reason = models.TextField(blank=True, default="")
    snapshot = models.JSONField(default=dict)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.act} {self.finding_id}"


class PoolReview(models.Model):
    """A pool the platform owes: platform-caused throttles or latency misses inside the envelope."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="reviews")
    finding = models.OneToOneField(Finding, on_delete=models.CASCADE, related_name="review")
    hours = models.JSONField(default=dict, help_text="hour (UTC) → platform-caused throttles + misses")
    opened_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at"]

    def __str__(self) -> str:
        return f"review of {self.pool_id}"


class ForecastAccuracy(models.Model):
    """One past forecast series against what then happened, hour by hour over the hours now past."""

    run = models.ForeignKey(ForecastRun, on_delete=models.CASCADE, related_name="+")
    series = models.OneToOneField(ForecastSeries, on_delete=models.CASCADE, related_name="accuracy")
    tenant_slug = models.CharField(max_length=64)
    model = models.CharField(max_length=64)
    region = models.CharField(max_length=64)
    hours = models.PositiveIntegerField(help_text="forecast hours now past and compared")
    realised_mean_cu = models.FloatField()
    p50_mean_cu = models.FloatField()
    p90_mean_cu = models.FloatField()
    share_above_p50 = models.FloatField(help_text="hours realised above the P50 (≈ 0.5 if calibrated)")
    share_above_p90 = models.FloatField(help_text="hours realised above the P90 (≈ 0.1 if calibrated)")
    wape_p50 = models.FloatField(null=True, help_text="Σ|realised − P50| ÷ Σ realised")
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-share_above_p90", "tenant_slug"]

    def __str__(self) -> str:
        return f"{self.tenant_slug} {self.model}@{self.region} in {self.run_id}"
