"""Writes: event ingest (telemetry.ingest) and fleet samples."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction
from django.utils import timezone

from entitlements.models import Pool
from telemetry.ingest import EVENT_COLUMNS, IngestResult, check_source, ingest_events
from telemetry.models import FLEET_COLUMNS, FLEET_COUNTS, FleetSample
from telemetry.rollups import rollups_add
from telemetry.sql import upsert_replace
from telemetry.validation import FieldError, check_window, has_control, identifier, parse_ts, ts_window

__all__ = ["EVENT_COLUMNS", "IngestResult", "check_source", "fleet_samples_ingest", "ingest_events", "rollups_add"]


_FRACTIONS = ("accelerator_util", "kv_cache_usage", "accelerator_memory")


def _fleet_value(s: dict, name: str) -> Any:
    v = s.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise FieldError(name, "must be a non-negative number")
    if name in FLEET_COUNTS:
        if isinstance(v, float) and not v.is_integer():
            raise FieldError(name, "must be a whole number")
        return int(v)
    if name in _FRACTIONS and v > 1:
        raise FieldError(name, "a fraction between 0 and 1")
    return float(v)


def fleet_samples_ingest(*, source: str, samples: list[dict[str, Any]]) -> IngestResult:
    """Store pool samples; the same (pool, ts, source) again overwrites itself, so re-reads are idempotent."""
    source = check_source(source)
    result = IngestResult()
    wanted = {p for s in samples if isinstance(s, dict) and isinstance(p := s.get("pool"), str)}
    slugs = [p for p in wanted if not has_control(p)]  # a NUL fails the query on PostgreSQL
    pools = dict(Pool.objects.filter(slug__in=slugs).values_list("slug", "pk"))
    earliest, latest = ts_window(timezone.now())
    rows: dict[tuple, list] = {}
    for i, s in enumerate(samples):
        try:
            if not isinstance(s, dict):
                raise FieldError("non_field_errors", "a sample is a JSON object")
            pool = identifier(s.get("pool"), "pool")
            pool_id = pools.get(pool) if isinstance(pool, str) else None
            if pool_id is None:
                raise FieldError("pool", f"unknown pool {s.get('pool')!r}")
            ts = check_window(parse_ts(s.get("ts")), earliest, latest)
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
