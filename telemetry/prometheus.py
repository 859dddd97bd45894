"""Pull fleet samples from a Prometheus server's HTTP API (`/api/v1/query_range`).

Each configured query yields series labelled with the pool (source.pool_label), or, for a source whose
pool_label is `=<pool slug>` (Hyperion sets no pool label), series that all belong to that pool; values at
the same evaluation instant are merged into one FleetSample per (pool, ts). A series naming no pool, or a
pool that does not exist, is dropped and counted: the source's last_error says how many and why. The range starts `overlap_s`
before the last pull and is aligned to the step, so overlapping pulls evaluate at the same instants
and the unique (pool, ts, source) key makes a re-read overwrite itself instead of adding rows.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from entitlements.models import Pool
from telemetry.atlas_pull import pull_atlas
from telemetry.models import FLEET_COLUMNS, FLEET_COUNTS, PrometheusSource
from telemetry.prom_presets import fixed_pool, queries_of
from telemetry.prometheus_http import PrometheusError, PullResult, query_range
from telemetry.services import fleet_samples_ingest

__all__ = ["PrometheusError", "PullResult", "collect", "pull_source", "pull_window", "query_range"]


def pull_window(source: PrometheusSource, now: datetime) -> tuple[datetime, datetime]:
    if source.last_pulled_at is None:
        start = now - timedelta(seconds=source.initial_lookback_s)
    else:
        start = source.last_pulled_at - timedelta(seconds=source.overlap_s)
    step = source.step_s
    aligned = math.floor(start.timestamp() / step) * step
    return datetime.fromtimestamp(aligned, tz=UTC), now


def _value(name: str, raw: str) -> float | int | None:
    v = float(raw)
    if not math.isfinite(v):
        return None  # NaN/Inf from an empty division: no observation, not a zero
    return round(v) if name in FLEET_COUNTS else v


def collect(
    source: PrometheusSource, start: datetime, end: datetime, dropped: list[int] | None = None
) -> dict[tuple[str, float], dict[str, Any]]:
    """(pool slug, unix ts) → {field: value} across every configured query; a series naming no pool is
    counted in `dropped[0]`."""
    merged: dict[tuple[str, float], dict[str, Any]] = {}
    try:
        queries = queries_of(source)
    except ValueError as exc:  # a preset's job or window the admin let through: the source's error, not a crash
        raise PrometheusError(str(exc)) from None
    fixed = fixed_pool(source.pool_label)
    for name, promql in sorted(queries.items()):
        if name not in FLEET_COLUMNS:
            raise PrometheusError(f"query {name!r} is not a fleet sample field ({', '.join(FLEET_COLUMNS)})")
        for series in query_range(source.base_url, promql, start, end, source.step_s):
            pool = fixed or series.get("metric", {}).get(source.pool_label)
            if not pool:
                if dropped is not None:
                    dropped[0] += 1
                continue
            for ts, raw in series.get("values", []):
                merged.setdefault((pool, float(ts)), {})[name] = _value(name, raw)
    return merged


def pull_source(source: PrometheusSource, *, now: datetime | None = None) -> PullResult:
    """Read one source's window and store it; the caller holds the source's claim."""
    now = now or timezone.now()
    start, end = pull_window(source, now)
    if source.preset == "atlas":
        result = pull_atlas(source, start, end)
        unmapped = ", ".join(sorted(result.unmapped_keys)[:10])
        PrometheusSource.objects.filter(pk=source.pk).update(
            last_pulled_at=end, last_error=f"api_keys not in the map (not stored): {unmapped}" if unmapped else ""
        )
        return result
    dropped = [0]
    merged = collect(source, start, end, dropped)
    known = set(Pool.objects.filter(slug__in={p for p, _ in merged}).values_list("slug", flat=True))
    result = PullResult(start=start, end=end, unknown_pools={p for p, _ in merged} - known, dropped_series=dropped[0])
    samples = [
        {"pool": pool, "ts": datetime.fromtimestamp(ts, tz=UTC), **values}
        for (pool, ts), values in sorted(merged.items())
        if pool in known
    ]
    stored = fleet_samples_ingest(source=f"prometheus:{source.name}", samples=samples)
    result.samples = stored.accepted
    result.errors = stored.errors
    problems = [f"{e['field']}: {e['message']}" for e in stored.errors[:5]]
    if result.dropped_series:
        problems.append(
            f"{result.dropped_series} series dropped: no '{source.pool_label}' label"
            " (Hyperion sets none: set pool_label to =<pool slug>)"
        )
    if result.unknown_pools:
        problems.append(f"series of unknown pools dropped: {', '.join(sorted(result.unknown_pools)[:10])}")
    PrometheusSource.objects.filter(pk=source.pk).update(last_pulled_at=end, last_error="; ".join(problems))
    return result
