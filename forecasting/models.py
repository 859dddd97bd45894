"""Forecast runs and their results, and planned supply.

A run is split into chunks of series (ForecastChunk); each chunk writes its series and adds its
share of pool demand once, guarded by its claim, and the last chunk to land finishes the run.
Supply gap and cost are not stored: they are computed from the newest run's demand and today's
supply and orders, so a new supply order shows up without re-running the forecast.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from entitlements.models import Pool, Tenant
from runs.models import ClaimedRun


class ForecastRun(ClaimedRun):
    """A forecast over every series, claimed like every run (runs.claims), then split into chunks."""

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Run now"
        SCHEDULE = "schedule", "Schedule"

    STALE_AFTER_SETTING = "FORECAST_RUN_STALE_AFTER_S"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    parameters = models.JSONField(default=dict, blank=True)
    progress = models.PositiveSmallIntegerField(default=0, help_text="0–100")
    results_written = models.PositiveIntegerField(
        default=0, help_text="times results were committed: 1 after success, whatever the redeliveries"
    )
    series_count = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(
        default=0, help_text="chunks the run was split into (0: not planned yet)"
    )
    chunks_done = models.PositiveIntegerField(default=0, help_text="chunks whose results are written")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=100), name="run_progress_range"),
        ]
        indexes = [models.Index(fields=["status", "-created_at"], name="run_status_created")]

    def __str__(self) -> str:
        return f"run {self.id} {self.status} {self.progress}%"


class ForecastChunk(models.Model):
    """A slice of a run's series that one worker forecasts and writes once (issue 21.2).

    Claimed like runs are (a compare-and-swap on state and claim token, a heartbeat per batch, a
    stale claim taken over by the redelivered task); its results are written in one transaction
    whose first statement is the conditional UPDATE that marks it done, so they land exactly once.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(ForecastRun, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    keys = models.JSONField(default=list, help_text="[[tenant, model, region, [[pool_id, share], …]], …]")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    claim_token = models.CharField(max_length=200, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="claims taken, including re-claims")
    writes = models.PositiveIntegerField(default=0, help_text="times its results were committed: 1 once done")
    profile = models.JSONField(
        default=list, help_text="expected demand of its series by hour of day (first week): the run's spike hours"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="chunk_unique_in_run")]

    def __str__(self) -> str:
        return f"chunk {self.index} of {self.run_id} {self.state}"


class ForecastSeries(models.Model):
    """One (tenant, model, region) demand series of a run, in CU (weighted tokens/s ÷ R).

    `hourly` holds the first two weeks hour by hour for the fan chart; `weekly` holds 26 weekly
    peaks (capacity has to cover the peak hour, not the mean) plus the expected weekly mean.
    """

    run = models.ForeignKey(ForecastRun, on_delete=models.CASCADE, related_name="series")
    tenant_slug = models.CharField(max_length=64)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    model = models.CharField(max_length=64)
    region = models.CharField(max_length=64)
    method = models.CharField(max_length=32)
    history_hours = models.PositiveIntegerField()
    start = models.DateTimeField(help_text="first forecast hour")
    history = models.JSONField(default=list, help_text="last 7 days of observed hourly demand, CU")
    hourly = models.JSONField(default=dict)
    weekly = models.JSONField(default=dict)
    error_metric = models.CharField(max_length=16, default="wape")
    candidates = models.JSONField(
        default=list, help_text="[{method, selection_error, holdout_error}]: chosen on selection, scored on holdout"
    )
    holdout_error = models.FloatField(null=True, blank=True, help_text="the chosen method on the last origin")
    coverage = models.JSONField(default=dict, help_text="share of holdout hours at or below P50, P90, P99")
    note = models.CharField(max_length=200, blank=True, default="", help_text="why the method is not the winner")
    selection = models.JSONField(
        default=dict,
        blank=True,
        help_text="at the lead time: horizons scored, weights, per-horizon errors, runner-up, why, trend, "
        "backtest chart (docs/forecasting.md)",
    )
    realised = models.JSONField(
        default=dict,
        blank=True,
        help_text="earlier runs' forecasts of this series against what happened, and the band factor it gave",
    )
    stress_basis = models.JSONField(
        default=dict,
        blank=True,
        help_text="while its run is open: what the stress scenario needs once the run's spike hours are known",
    )

    class Meta:
        ordering = ["tenant_slug", "model", "region"]
        constraints = [
            models.UniqueConstraint(fields=["run", "tenant_slug", "model", "region"], name="series_unique_in_run")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_slug} {self.model}@{self.region}"


class PoolDemand(models.Model):
    """A run's demand mapped onto one pool, hour by hour over the 26-week horizon, per scenario.

    Kept hourly because the cost of being wrong integrates the hours above supply, and a sum of
    weekly peaks would overstate it.
    """

    run = models.ForeignKey(ForecastRun, on_delete=models.CASCADE, related_name="pool_demand")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField()
    hourly = models.JSONField(default=dict, help_text="scenario → hourly CU")
    tenants = models.JSONField(default=dict, help_text="tenant slug → share of the pool's expected demand")

    class Meta:
        ordering = ["pool__slug"]
        constraints = [models.UniqueConstraint(fields=["run", "pool"], name="pool_demand_unique_in_run")]

    def __str__(self) -> str:
        return f"{self.pool_id} in {self.run_id}"


class SupplyOrder(models.Model):
    """Replicas bought for a pool; they count as supply from the week they arrive."""

    class Status(models.TextChoices):
        PLANNED = "planned", "Planned"
        ORDERED = "ordered", "Ordered"
        DELIVERED = "delivered", "Delivered (already in the pool's zones)"
        CANCELLED = "cancelled", "Cancelled"

    # Delivered orders are already counted in the pool's zones; counting them again would double supply.
    PENDING = (Status.PLANNED, Status.ORDERED)

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="supply_orders")
    replicas = models.PositiveIntegerField()
    arrival_date = models.DateField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PLANNED)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pool__slug", "arrival_date"]
        constraints = [models.CheckConstraint(condition=Q(replicas__gt=0), name="supply_order_replicas_positive")]

    def __str__(self) -> str:
        return f"{self.replicas} replicas for {self.pool_id} on {self.arrival_date}"


class CommittedAdjustment(models.Model):
    """A change to an entitlement's committed CU that planning counts before the entitlement itself is
    amended: an accepted reconciliation finding (issue 17.2) says "this one will be 2 CU smaller".

    The committed series (forecasting.gap) adds `cu_delta` from `from_ts` to the entitlement's end, as
    long as the entitlement is still at `entitlement_version`: once it is amended, the amendment
    carries the change itself and the adjustment lapses (never counted twice)."""

    entitlement = models.ForeignKey("entitlements.Entitlement", on_delete=models.CASCADE, related_name="+")
    cu_delta = models.DecimalField(max_digits=12, decimal_places=3)
    from_ts = models.DateTimeField()
    entitlement_version = models.PositiveIntegerField()
    source = models.CharField(max_length=200, help_text="what asked for it, e.g. reconciliation finding <id>")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.cu_delta:+} CU on {self.entitlement_id} from {self.from_ts:%Y-%m-%d}"
