"""Pull an Atlas gateway's `atlas_*` counters into GatewayUsageSample rows (issue 24).

Each counter's rate (over the source's rate_window) is read per `api_key` at every step of the pull
window and multiplied by step_s, so a row holds that step's requests, tokens and rejections. Keys are
mapped to (tenant, project, model, region) through the source's atlas_map; keys sharing an owner are
summed into one row. A key not in the map is counted in the result's unmapped_keys, never stored.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from entitlements.models import Tenant
from telemetry.atlas_map import KeyOwner, parse_atlas_map
from telemetry.models import GatewayUsageSample, PrometheusSource
from telemetry.prom_presets import ATLAS_COUNTERS, atlas_queries
from telemetry.prometheus_http import PrometheusError, PullResult, query_range

FIELDS = list(ATLAS_COUNTERS)


def collect_usage(
    source: PrometheusSource, start: datetime, end: datetime
) -> tuple[dict[tuple[KeyOwner, float], dict[str, float]], set[str]]:
    """(owner, unix ts) → {field: count in that step}, and the api_keys the map does not know."""
    try:
        queries = atlas_queries(source.job, source.rate_window or "1m")
    except ValueError as exc:
        raise PrometheusError(str(exc)) from None
    owners, _ = parse_atlas_map(source.atlas_map)  # bad lines were refused on save; any left are unmapped keys
    merged: dict[tuple[KeyOwner, float], dict[str, float]] = {}
    unmapped: set[str] = set()
    for name, promql in queries.items():
        for series in query_range(source.base_url, promql, start, end, source.step_s):
            key = series.get("metric", {}).get("api_key", "")
            owner = owners.get(key)
            if owner is None:
                unmapped.add(key)
                continue
            for ts, raw in series.get("values", []):
                rate = float(raw)
                if not math.isfinite(rate):
                    continue
                row = merged.setdefault((owner, float(ts)), dict.fromkeys(FIELDS, 0.0))
                row[name] += rate * source.step_s
    return merged, unmapped


def pull_atlas(source: PrometheusSource, start: datetime, end: datetime) -> PullResult:
    merged, unmapped = collect_usage(source, start, end)
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in={o.tenant for o, _ in merged})}
    rows = [
        GatewayUsageSample(
            source=source,
            tenant=tenants[owner.tenant],
            project=owner.project,
            model=owner.model,
            region=owner.region,
            ts=datetime.fromtimestamp(ts, tz=UTC),
            step_s=source.step_s,
            **values,
        )
        for (owner, ts), values in sorted(merged.items(), key=lambda kv: (kv[0][1], kv[0][0].tenant))
        if owner.tenant in tenants
    ]
    GatewayUsageSample.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["source", "tenant", "project", "model", "region", "ts"],
        update_fields=[*FIELDS, "step_s"],
    )
    return PullResult(samples=len(rows), start=start, end=end, unmapped_keys=unmapped)
