"""Telemetry: admission events, fleet samples, traces, rollups, and Prometheus sources.

Events keep catalogue references as slugs, not foreign keys: the serving path speaks slugs, an
event must survive a catalogue rename, and ingest stays one INSERT without lookups per row.
Rollups are keyed by the same slugs so they can be upserted with `ON CONFLICT … DO UPDATE`.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from entitlements.models import Pool, Tenant
from telemetry.histogram import bin_fields

# default_queries stays importable here: migration 0001 names telemetry.models.default_queries.
from telemetry.prom_presets import default_queries, queries_of


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


class FleetSample(models.Model):
    """One observation of a pool. Unique per (pool, ts, source) so overlapping pulls are idempotent."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="fleet_samples")
    ts = models.DateTimeField()
    source = models.CharField(max_length=64, default="gateway")
    replicas_healthy = models.PositiveIntegerField(null=True, blank=True)
    replicas_total = models.PositiveIntegerField(null=True, blank=True)
    accelerator_util = models.FloatField(null=True, blank=True, help_text="0–1")
    kv_cache_usage = models.FloatField(null=True, blank=True, help_text="0–1")
    requests_running = models.FloatField(null=True, blank=True)
    requests_waiting = models.FloatField(null=True, blank=True)
    # What a Hyperion-style server reports (issue 24, telemetry.prom_presets): served request rate,
    # accelerator memory in use, mean batch queueing wait and mean model inference time.
    throughput_rps = models.FloatField(null=True, blank=True, help_text="requests/s served")
    accelerator_memory = models.FloatField(null=True, blank=True, help_text="0–1 of accelerator memory in use")
    queue_wait_s = models.FloatField(null=True, blank=True, help_text="mean seconds a request waited for a batch")
    latency_s = models.FloatField(null=True, blank=True, help_text="mean seconds of model inference")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "ts", "source"], name="fleet_sample_unique"),
            models.CheckConstraint(
                condition=Q(replicas_healthy__isnull=True)
                | Q(replicas_total__isnull=True)
                | Q(replicas_healthy__lte=models.F("replicas_total")),
                name="fleet_healthy_within_total",
            ),
        ]
        indexes = [models.Index(fields=["pool", "-ts"], name="fleet_pool_ts_desc")]

    def __str__(self) -> str:
        return f"{self.pool_id}@{self.ts:%Y-%m-%d %H:%M:%S} {self.source}"


# A fleet sample's figures, in the order ingest writes them: the one list ingest, the Prometheus pull and
# the newest-sample read name them from. The first six are the pool's state the live pages show.
FLEET_STATE = (
    "replicas_healthy",
    "replicas_total",
    "accelerator_util",
    "kv_cache_usage",
    "requests_running",
    "requests_waiting",
)
FLEET_COLUMNS = (*FLEET_STATE, "throughput_rps", "accelerator_memory", "queue_wait_s", "latency_s")
FLEET_COUNTS = ("replicas_healthy", "replicas_total")  # whole replicas: a pulled value is rounded


class Trace(models.Model):
    """An uploaded request trace; `data` is numpy .npz bytes of arrays arrival_s, prompt, output.

    tenant empty = platform-wide (visible to everyone signed in).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="traces")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="traces"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    requests = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(default=0)
    characterisation = models.JSONField(default=dict)
    data = models.BinaryField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


# served_from last: '' on all but spilled events' rows, which it splits by the pool that served them.
ROLLUP_KEY = (
    "bucket",
    "tenant",
    "project",
    "model",
    "region",
    "traffic_class",
    "entitlement",
    "decision",
    "reason",
    "served_from",
)
ROLLUP_SUMS = (
    "requests",
    "estimated_wt",
    "actual_wt",
    "prompt_tokens",
    "cached_prompt_tokens",
    "output_tokens",
    "slo_met",
    "slo_total",
)
TTFT_BINS = bin_fields("ttft")
E2E_BINS = bin_fields("e2e")
# Length histograms (tokens, the same log-spaced edges: 1 … 10^6 tokens) of each row's events.
PROMPT_BINS = bin_fields("plen")
OUTPUT_BINS = bin_fields("olen")
# Settled requests by outcome (issue 33): served ones that reported their latency, by whether they were
# inside their envelope (telemetry.envelopes) × whether they met the SLO, so a statement blames each miss
# per request; and completions that were not served, by status (served = neither of these).
ROLLUP_OUTCOMES = (
    "slo_inside_met",
    "slo_inside_missed",
    "slo_outside_met",
    "slo_outside_missed",
    "status_error",
    "status_cancelled",
    "status_expired",
)
# Events by where their capacity came from (issue 36): per row, the events whose source_kind is
# `borrowed` (a best_effort admission on lent pool room) or `spillover` (an admission beyond the own
# bucket, served by the entitlement's spillover target), and their settled (actual) wt. The row's
# decision says what was counted: on admit rows the admitted requests, on complete rows the settled
# ones and their wt. A spilled event names the entitlement that spilled, so it counts in that scope.
ROLLUP_SOURCE_KINDS = {"borrowed": "borrowed", "spilled": "spillover"}  # column prefix → source_kind
ROLLUP_SOURCES = ("borrowed_requests", "borrowed_wt", "spilled_requests", "spilled_wt")
# What a replay needs past raw-event retention (issue 45, docs/planning.md "Past retention"): per row, the
# events arriving in each 3 s slot of their minute (20 slots), and their estimated wt in the log-spaced
# bins (telemetry.histogram's edges read as wt). A minute spread evenly at its mean cost hid the bursts
# and the small requests that slip through a nearly empty bucket: on the conversation trace it said
# 5.23 % throttled at 10.8 CU where the raw events say 3.70 % (this profile: 3.23 %); on the coding trace it
# answered 11.5 CU where the raw events need 13.8 (this profile: 13.4). Both add up across batches and
# levels as every other count does (tests/forecasting/test_rollup_replay.py).
ARRIVAL_SLOT_S = 3
ARRIVAL_SLOTS = tuple(f"arr_s{i:02d}" for i in range(60 // ARRIVAL_SLOT_S))
WT_BINS = bin_fields("wt")
ROLLUP_ADDITIVE = (
    ROLLUP_SUMS
    + TTFT_BINS
    + E2E_BINS
    + PROMPT_BINS
    + OUTPUT_BINS
    + ROLLUP_OUTCOMES
    + ARRIVAL_SLOTS
    + WT_BINS
    + ROLLUP_SOURCES
)
# Merged by the larger, not by addition: the longest prompt and output, the most reservations in flight
# right after an admit (the store's exact count, carried on admit events as `in_flight`), and the
# shortest prompt and output stored as MIN_REV_BASE − length, so that the larger of two is the shorter
# length and the rollups' one merge rule (and the fold's MAX) keeps it; 0 = no event counted.
ROLLUP_MAX = ("prompt_max", "output_max", "inflight_max", "prompt_min_rev", "output_min_rev")
MIN_REV_BASE = 10**9 + 1  # one past the longest length ingest accepts (telemetry.validation.TOKENS_MAX)
ROLLUP_VALUES = ROLLUP_ADDITIVE + ROLLUP_MAX


class RollupBase(models.Model):
    """Additive aggregates of events per bucket and key; every value column merges by addition.

    Latency and length percentiles are kept as fixed log-spaced histogram counts (one column per bin,
    see telemetry.histogram) so they merge across minutes and levels with plain SQL `+`; the ROLLUP_MAX
    columns merge with the larger of the two instead. Empty strings,
    not NULLs, in the key: NULLs are distinct in unique indexes and would defeat ON CONFLICT.
    """

    bucket = models.DateTimeField()
    tenant = models.CharField(max_length=64)
    project = models.CharField(max_length=64, default="")
    model = models.CharField(max_length=64)
    region = models.CharField(max_length=64)
    traffic_class = models.CharField(max_length=16)
    entitlement = models.CharField(max_length=36, default="", help_text="uuid string, '' when none")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.CharField(max_length=32, default="")
    served_from = models.CharField(max_length=80, default="", help_text="pool slug of spilled events, '' otherwise")
    requests = models.BigIntegerField(default=0)
    estimated_wt = models.FloatField(default=0)
    actual_wt = models.FloatField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_prompt_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    slo_met = models.BigIntegerField(default=0)
    slo_total = models.BigIntegerField(
        default=0, help_text="served completions that reported slo_met at all (not error, cancelled or expired)"
    )
    for _name in (
        TTFT_BINS + E2E_BINS + PROMPT_BINS + OUTPUT_BINS + ROLLUP_OUTCOMES + ARRIVAL_SLOTS + WT_BINS + ROLLUP_MAX
    ):
        locals()[_name] = models.BigIntegerField(default=0)
    borrowed_requests = models.BigIntegerField(default=0)
    borrowed_wt = models.FloatField(default=0)
    spilled_requests = models.BigIntegerField(default=0)
    spilled_wt = models.FloatField(default=0)
    del _name

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} {self.tenant} {self.model}@{self.region} {self.decision}"


def _rollup_meta(prefix: str) -> dict:
    return {
        "constraints": [models.UniqueConstraint(fields=list(ROLLUP_KEY), name=f"{prefix}_rollup_key")],
        "indexes": [
            models.Index(fields=["tenant", "bucket"], name=f"{prefix}_tenant_bucket"),
            models.Index(fields=["entitlement", "bucket"], name=f"{prefix}_ent_bucket"),
            models.Index(fields=["bucket"], name=f"{prefix}_bucket"),
        ],
    }


class RollupBacklog(models.Model):
    """An hour whose minute rollups grew since its hour and day rollups were last folded from them.

    Ingest adds to the minute rollups only, and notes the hours it touched here in the same
    transaction; telemetry.rollups.fold recomputes those hours and their days from the minutes.
    One row per ingest and hour, never updated: concurrent writers never wait on each other here.
    """

    hour = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00}"


class MinuteRollup(RollupBase):
    class Meta(RollupBase.Meta):
        abstract = False
        constraints = _rollup_meta("minute")["constraints"]
        indexes = _rollup_meta("minute")["indexes"]


IMPORTED_HELP = "from a history import (telemetry.history_import), not measured here; a day: every hour of it"


class HourRollup(RollupBase):
    imported = models.BooleanField(default=False, db_default=False, help_text=IMPORTED_HELP)

    class Meta(RollupBase.Meta):
        abstract = False
        constraints = _rollup_meta("hour")["constraints"]
        indexes = _rollup_meta("hour")["indexes"]


class DayRollup(RollupBase):
    imported = models.BooleanField(default=False, db_default=False, help_text=IMPORTED_HELP)

    class Meta(RollupBase.Meta):
        abstract = False
        constraints = _rollup_meta("day")["constraints"]
        indexes = _rollup_meta("day")["indexes"]


class PrometheusSource(models.Model):
    """A Prometheus server to pull fleet samples from, one query per FleetSample field."""

    name = models.SlugField(max_length=64, unique=True)
    base_url = models.URLField(max_length=300, help_text="e.g. http://prometheus:9090")
    enabled = models.BooleanField(default=True)
    preset = models.CharField(
        max_length=16,
        choices=[
            ("custom", "custom (the queries below)"),
            ("vllm", "vLLM + DCGM"),
            ("hyperion", "Hyperion"),
            ("atlas", "Atlas"),
        ],
        default="custom",
        help_text="a preset's queries replace the ones below when pulled (telemetry.prom_presets)",
    )
    job = models.CharField(max_length=100, blank=True, default="", help_text="the `job` label a preset selects")
    rate_window = models.CharField(
        max_length=8, default="1m", help_text="PromQL range of a preset's rate()s: at least 4 scrape intervals"
    )
    queries = models.JSONField(default=default_queries)
    atlas_map = models.TextField(
        blank=True,
        default="",
        help_text="Atlas preset: which tenant, project, model and region each API key serves; CSV api_key,tenant,project,model,region, one key a line",
    )
    pool_label = models.CharField(max_length=64, default="pool", help_text="label whose value is the pool slug")
    step_s = models.PositiveIntegerField(default=15)
    overlap_s = models.PositiveIntegerField(default=120, help_text="re-read this much before last_pulled_at")
    initial_lookback_s = models.PositiveIntegerField(default=600)
    last_pulled_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True, help_text="a pull in progress holds the source")
    last_error = models.TextField(blank=True, default="")
    last_duration_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The admin's check of a preset's job and rate window (telemetry.prom_presets)."""
        from django.core.exceptions import ValidationError

        try:
            queries_of(self)
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            raise ValidationError({field: message}) from None
        if self.preset == "atlas":
            from telemetry.atlas_map import parse_atlas_map

            owners, errors = parse_atlas_map(self.atlas_map)
            if errors:
                raise ValidationError({"atlas_map": errors})
            if not owners:
                raise ValidationError({"atlas_map": "the Atlas preset needs at least one api_key line"})


class GatewayUsageSample(models.Model):
    """Usage evidence from an Atlas gateway (issue 24): one pull step of a mapped owner's keys, summed.

    Counts are per step: the preset's rate over its rate_window × step_s. A re-read of the same step
    overwrites its row (the unique key), as fleet samples do.
    """

    source = models.ForeignKey(PrometheusSource, on_delete=models.CASCADE, related_name="usage_samples")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="gateway_usage")
    project = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=64, blank=True, default="")
    region = models.CharField(max_length=64, blank=True, default="")
    ts = models.DateTimeField()
    step_s = models.PositiveIntegerField()
    requests = models.FloatField(default=0)
    tokens = models.FloatField(default=0)
    quota_rejections = models.FloatField(default=0)
    rate_limit_rejections = models.FloatField(default=0)

    class Meta:
        ordering = ["-ts"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "tenant", "project", "model", "region", "ts"], name="gateway_usage_unique_step"
            )
        ]
        indexes = [models.Index(fields=["tenant", "ts"], name="gateway_usage_tenant_ts")]

    def __str__(self) -> str:
        return f"{self.tenant_id}@{self.ts:%Y-%m-%dT%H:%M:%S}"


class DeadLetter(models.Model):
    """A unit of work a pipeline (ingest, fold, event sink, task) gave up on, kept for an operator.

    A pipeline never stalls on one bad row: after its bounded retries it quarantines the unit here
    (telemetry.deadletter.dead_letter) and goes on with the rest. The same (stage, key) failing
    again counts up `attempts` rather than adding a row.
    """

    stage = models.CharField(max_length=64, help_text="which pipeline gave up, e.g. fold, ingest_task, admission_sink")
    key = models.CharField(max_length=200, help_text="what it gave up on, e.g. the hour of a backlog row")
    payload = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    error = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    last_failed_at = models.DateTimeField(auto_now=True)
    attempts = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-last_failed_at"]
        constraints = [models.UniqueConstraint(fields=["stage", "key"], name="deadletter_unique_stage_key")]

    def __str__(self) -> str:
        return f"{self.stage}:{self.key}"


class PoolAlert(models.Model):
    """One Alertmanager alert (telemetry.alertmanager), kept per (fingerprint, startsAt): one firing episode.

    Bound to a pool by its pool label (ALERTMANAGER_POOL_LABEL); an alert naming no known pool is kept
    unbound (pool null, `pool_label` says what it named) so an operator can see it. Supply alerts
    (ALERTMANAGER_SUPPLY_ALERTS) take replicas out of the pool's health while firing; load alerts are
    evidence only (reconciliation reads them through telemetry.selectors.pool_alerts).
    """

    class Kind(models.TextChoices):
        SUPPLY = "supply", "supply"
        LOAD = "load", "load"

    class State(models.TextChoices):
        FIRING = "firing", "firing"
        RESOLVED = "resolved", "resolved"

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="alerts")
    pool_label = models.CharField(max_length=200, blank=True, default="", help_text="the pool label's value as sent")
    fingerprint = models.CharField(max_length=64)
    alertname = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    state = models.CharField(max_length=8, choices=State.choices)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True, help_text="set when resolved (or when Alertmanager sent one)")
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    generator_url = models.CharField(max_length=2000, blank=True, default="")
    receiver = models.CharField(max_length=200, blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="poolalert_unique_episode"),
        ]
        indexes = [models.Index(fields=["pool", "state"], name="poolalert_pool_state")]

    def __str__(self) -> str:
        return f"{self.alertname} ({self.state}) on {self.pool_label or '-'}"
