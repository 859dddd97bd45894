"""Writes: event ingest with rollups in the same transaction, and fleet samples."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Any

from django.db import transaction
from django.utils import timezone

from entitlements.models import Pool
from telemetry import metrics
from telemetry.histogram import N_BINS, bin_of
from telemetry.models import (
    ROLLUP_ADDITIVE,
    ROLLUP_KEY,
    AdmissionEvent,
    DayRollup,
    FleetSample,
    HourRollup,
    MinuteRollup,
)
from telemetry.sql import insert_new_in_scope, upsert_add, upsert_replace
from telemetry.validation import Catalogue, FieldError, clean_event, parse_ts

EVENT_COLUMNS = (
    "source",
    "event_id",
    "ts",
    "received_at",
    "tenant",
    "project",
    "model",
    "region",
    "traffic_class",
    "entitlement",
    "decision",
    "reason",
    "source_kind",
    "estimated_wt",
    "actual_wt",
    "prompt_tokens",
    "cached_prompt_tokens",
    "output_tokens",
    "ttft_ms",
    "e2e_ms",
    "slo_met",
    "status",
)
_TTFT0 = ROLLUP_ADDITIVE.index("ttft_b00")
_E2E0 = ROLLUP_ADDITIVE.index("e2e_b00")
_WIDTH = len(ROLLUP_ADDITIVE)


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "errors": self.errors}


def _check_source(source: Any) -> str:
    if not isinstance(source, str) or not source or len(source) > 64:
        raise ValueError("source: required, a string of at most 64 characters")
    return source


def ingest_events(*, source: str, events: list[dict[str, Any]]) -> IngestResult:
    """Validate, store new events, and add only the new ones to the rollups, in one transaction.

    Dedup is on (source, event_id) inside the transaction (telemetry.sql.insert_new_in_scope: an
    advisory lock per source + index probe + COPY on PostgreSQL, `INSERT … ON CONFLICT DO NOTHING
    RETURNING` on SQLite), so it knows exactly which rows this transaction inserted and a replayed
    or concurrently delivered event is counted in the rollups once. A repeat inside one batch
    counts as a duplicate too.
    """
    source = _check_source(source)
    result = IngestResult()
    cat = Catalogue.for_events(events)
    by_id: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(events):
        try:
            row = clean_event(raw, cat)
        except FieldError as exc:
            result.errors.append({"index": i, "field": exc.field, "message": exc.message})
            continue
        if row["event_id"] in by_id:
            result.duplicates += 1
            continue
        by_id[row["event_id"]] = row
    if not by_id:
        return result
    now = timezone.now()
    ordered = [by_id[k] for k in sorted(by_id)]  # one lock order for every writer
    pick = itemgetter(*EVENT_COLUMNS[4:])
    values = [(source, r["event_id"], r["ts"], now, *pick(r)) for r in ordered]
    with transaction.atomic():
        new_ids = set(insert_new_in_scope(AdmissionEvent, EVENT_COLUMNS, values, "source", "event_id"))
        new_rows = [by_id[k] for k in sorted(new_ids)]
        rollups_add(new_rows)
    result.accepted = len(new_ids)
    result.duplicates += len(by_id) - len(new_ids)
    metrics.observe_ingest(source, new_rows, now)
    return result


def _truncate(ts: datetime, level: str) -> datetime:
    if level == "minute":
        return ts.replace(second=0, microsecond=0)
    if level == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    return ts.replace(hour=0, minute=0, second=0, microsecond=0)


def minute_deltas(rows: Iterable[dict[str, Any]]) -> dict[tuple, list]:
    """Events → additive rollup values per minute key (ROLLUP_KEY order, ROLLUP_ADDITIVE order)."""
    out: dict[tuple, list] = {}
    for r in rows:
        ent = r["entitlement"]
        key = (
            _truncate(r["ts"], "minute"),
            r["tenant"],
            r["project"],
            r["model"],
            r["region"],
            r["traffic_class"],
            str(ent) if ent else "",
            r["decision"],
            r["reason"],
        )
        acc = out.get(key)
        if acc is None:
            acc = out[key] = [0] * _WIDTH
            acc[1] = acc[2] = 0.0
        acc[0] += 1
        acc[1] += r["estimated_wt"]
        acc[2] += r["actual_wt"] or 0.0
        acc[3] += r["prompt_tokens"]
        acc[4] += r["cached_prompt_tokens"]
        acc[5] += r["output_tokens"]
        if r["slo_met"] is not None:
            acc[6] += 1 if r["slo_met"] else 0
            acc[7] += 1
        if r["ttft_ms"] is not None:
            acc[_TTFT0 + bin_of(r["ttft_ms"])] += 1
        if r["e2e_ms"] is not None:
            acc[_E2E0 + bin_of(r["e2e_ms"])] += 1
    return out


def _coarsen(deltas: dict[tuple, list], level: str) -> dict[tuple, list]:
    out: dict[tuple, list] = {}
    for key, vals in deltas.items():
        k = (_truncate(key[0], level), *key[1:])
        acc = out.get(k)
        if acc is None:
            out[k] = list(vals)
        else:
            for i, v in enumerate(vals):
                acc[i] += v
    return out


def rollups_add(rows: list[dict[str, Any]]) -> None:
    """Add events to minute, hour and day rollups in the caller's transaction (keys sorted: lock order)."""
    minute = minute_deltas(rows)
    for model, deltas in (
        (MinuteRollup, minute),
        (HourRollup, _coarsen(minute, "hour")),
        (DayRollup, _coarsen(minute, "day")),
    ):
        upsert_add(model, ROLLUP_KEY, ROLLUP_ADDITIVE, [[*k, *deltas[k]] for k in sorted(deltas)])


assert _E2E0 == _TTFT0 + N_BINS  # noqa: S101 - the bin columns are laid out back to back

FLEET_COLUMNS = (
    "replicas_healthy",
    "replicas_total",
    "accelerator_util",
    "kv_cache_usage",
    "requests_running",
    "requests_waiting",
)
_FRACTIONS = ("accelerator_util", "kv_cache_usage")
_COUNTS = ("replicas_healthy", "replicas_total")


def _fleet_value(s: dict, name: str) -> Any:
    v = s.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise FieldError(name, "must be a non-negative number")
    if name in _COUNTS:
        if isinstance(v, float) and not v.is_integer():
            raise FieldError(name, "must be a whole number")
        return int(v)
    if name in _FRACTIONS and v > 1:
        raise FieldError(name, "a fraction between 0 and 1")
    return float(v)


def fleet_samples_ingest(*, source: str, samples: list[dict[str, Any]]) -> IngestResult:
    """Store pool samples; the same (pool, ts, source) again overwrites itself, so re-reads are idempotent."""
    source = _check_source(source)
    result = IngestResult()
    wanted = {s.get("pool") for s in samples if isinstance(s, dict)}
    pools = dict(Pool.objects.filter(slug__in=[p for p in wanted if isinstance(p, str)]).values_list("slug", "pk"))
    rows: dict[tuple, list] = {}
    for i, s in enumerate(samples):
        try:
            if not isinstance(s, dict):
                raise FieldError("non_field_errors", "a sample is a JSON object")
            pool_id = pools.get(s.get("pool"))  # type: ignore[arg-type]
            if pool_id is None:
                raise FieldError("pool", f"unknown pool {s.get('pool')!r}")
            ts = parse_ts(s.get("ts"))
            vals = [_fleet_value(s, n) for n in FLEET_COLUMNS]
            if vals[0] is not None and vals[1] is not None and vals[0] > vals[1]:
                raise FieldError("replicas_healthy", "more than replicas_total")
        except FieldError as exc:
            result.errors.append({"index": i, "field": exc.field, "message": exc.message})
            continue
        rows[(pool_id, ts)] = [pool_id, ts, source, *vals]
    with transaction.atomic():
        result.accepted = upsert_replace(
            FleetSample, ("pool", "ts", "source"), FLEET_COLUMNS, [rows[k] for k in sorted(rows)]
        )
    return result
