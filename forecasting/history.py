"""The only place forecasting reads telemetry: hourly rollups → dense hourly series.

Demand that arrived = admitted + throttled. Both decisions carry `estimated_wt` in the hour the
request arrived; throttled requests never ran, so an estimate is all there is for them, and using
the estimate for both keeps one unit per hour. CU = weighted tokens per second ÷ R of the model.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Min, QuerySet, Sum

from entitlements.models import ServedModel
from telemetry.models import HourRollup

HOUR = timedelta(hours=1)
ARRIVED = ("admit", "throttle")


@dataclass(frozen=True)
class DemandSeries:
    tenant: str
    model: str
    region: str
    start: datetime  # first hour (UTC, on the hour)
    values: np.ndarray  # CU, one per hour, missing hours are 0 (no traffic arrived)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.tenant, self.model, self.region)


@dataclass(frozen=True)
class HourlyUsage:
    """Per (tenant, model, region) hour: what was served and how much of it met the SLO."""

    tenant: str
    model: str
    region: str
    hour: datetime
    output_tokens: int
    slo_met: int
    slo_total: int
    arrived_wt: float


def floor_hour(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def r_by_model() -> dict[str, float]:
    return dict(ServedModel.objects.values_list("slug", "r_wt_per_s"))


Key = tuple[str, str, str]


def series_keys(*, start: datetime, end: datetime, min_hours: int = 0) -> list[Key]:
    """The (tenant, model, region) series demand_series would return with at least `min_hours` hours,
    sorted, without reading their values: what a run splits into chunks."""
    start, end = floor_hour(start), floor_hour(end)
    r = r_by_model()
    rows = (
        HourRollup.objects.filter(bucket__gte=start, bucket__lt=end, decision__in=ARRIVED)
        .values_list("tenant", "model", "region")
        .annotate(first=Min("bucket"))
        .order_by()
    )
    return sorted(
        (t, m, reg) for t, m, reg, first in rows if m in r and int((end - floor_hour(first)) / HOUR) >= min_hours
    )


def _epoch_hours(buckets: list[Any]) -> list[int]:
    """Hours since the epoch of raw bucket values (a naive datetime is UTC, as Django stores it on SQLite;
    text when no converter ran). Read past the ORM: its per-row conversion was most of a run's reading."""
    if not buckets:
        return []
    if isinstance(buckets[0], str):
        return (np.array([b[:19] for b in buckets], dtype="datetime64[s]").astype(np.int64) // 3600).tolist()
    return [int((b if b.tzinfo else b.replace(tzinfo=UTC)).timestamp()) // 3600 for b in buckets]


def demand_series(*, start: datetime, end: datetime, keys: list[Key] | None = None) -> list[DemandSeries]:
    """Hourly arrived demand in CU per (tenant, model, region) over [start, end), or only the given keys.

    A series starts at its first hour with traffic (a new tenant has a short history) and runs to
    `end`; hours with no rows inside that span are zero demand, not missing data.
    """
    start, end = floor_hour(start), floor_hour(end)
    r = r_by_model()
    if keys is not None and not keys:
        return []
    rows: QuerySet[Any, Any] = HourRollup.objects.filter(bucket__gte=start, bucket__lt=end, decision__in=ARRIVED)
    wanted = set(keys) if keys is not None else None
    if keys:
        # A chunk's keys are a sorted slice: its tenants are one range (the tenant, bucket index).
        rows = rows.filter(tenant__gte=min(keys)[0], tenant__lte=max(keys)[0])
    qs = rows.values_list("tenant", "model", "region", "bucket").annotate(wt=Sum("estimated_wt")).order_by()
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        got = cur.fetchall()
    hour_of = _epoch_hours([g[3] for g in got])
    by_key: dict[Key, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    for (tenant, model, region, _, wt), h in zip(got, hour_of, strict=True):
        if model not in r:
            continue  # a model no longer in the catalogue has no R, so no CU
        key = (tenant, model, region)
        if wanted is not None and key not in wanted:
            continue
        idx, vals = by_key[key]
        idx.append(h)
        vals.append(float(wt or 0.0))
    end_h = int(end.timestamp()) // 3600
    out = []
    for key in sorted(by_key):
        idx_l, vals_l = by_key[key]
        at = np.asarray(idx_l, dtype=np.int64)
        first = int(at.min())
        values = np.zeros(end_h - first)
        np.add.at(values, at - first, np.asarray(vals_l) / 3600.0 / r[key[1]])
        out.append(DemandSeries(key[0], key[1], key[2], datetime.fromtimestamp(first * 3600, tz=UTC), values))
    return out


def hourly_usage(*, start: datetime, end: datetime) -> list[HourlyUsage]:
    """Served output tokens and SLO counts (from settled reservations) plus arrived wt per hour."""
    rows = (
        HourRollup.objects.filter(bucket__gte=floor_hour(start), bucket__lt=floor_hour(end))
        .values("tenant", "model", "region", "bucket", "decision")
        .annotate(out=Sum("output_tokens"), met=Sum("slo_met"), total=Sum("slo_total"), wt=Sum("estimated_wt"))
        .order_by()
    )
    acc: dict[tuple[str, str, str, datetime], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    for row in rows:
        a = acc[(row["tenant"], row["model"], row["region"], floor_hour(row["bucket"]))]
        if row["decision"] == "complete":
            a[0] += int(row["out"] or 0)
            a[1] += int(row["met"] or 0)
            a[2] += int(row["total"] or 0)
        elif row["decision"] in ARRIVED:
            a[3] += float(row["wt"] or 0.0)
    return [
        HourlyUsage(t, m, reg, h, int(a[0]), int(a[1]), int(a[2]), float(a[3]))
        for (t, m, reg, h), a in sorted(acc.items())
    ]
