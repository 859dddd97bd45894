"""The minute, hour and day rollups of the events and the backlog of hours to fold.

Rollups are keyed by the events' slugs so they can be upserted with `ON CONFLICT … DO UPDATE`.
"""

from __future__ import annotations

from django.db import models

from telemetry.histogram import bin_fields
from telemetry.models.events import Decision

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
