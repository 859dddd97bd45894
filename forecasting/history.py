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
from django.db.models import BigIntegerField, Func, Min, QuerySet, Sum

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


class EpochHour(Func):
    """A bucket as whole hours since 1970, computed by the database (an integer: no per-row datetime
    parsing, which was most of a run's reading). Integer arithmetic on both databases, so an hour is never
    floored one below by a float's last digit (admission.snapshot_reads.Epoch is a float)."""

    output_field = BigIntegerField()
    convert_value = staticmethod(Func._convert_value_noop)  # type: ignore[attr-defined]  # private in Django

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="FLOOR(EXTRACT(EPOCH FROM %(expressions)s) / 3600)::bigint", **extra
        )

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Stored as UTC text; strftime('%s') is whole seconds, so the division is exact integer flooring.
        return self.as_sql(
            compiler, connection, template="(CAST(strftime('%%%%s', %(expressions)s) AS INTEGER) / 3600)", **extra
        )


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
    qs = (
        rows.annotate(hour=EpochHour("bucket"))
        .values_list("tenant", "model", "region", "hour")
        .annotate(wt=Sum("estimated_wt"))
        .order_by()
    )
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        got = cur.fetchall()
    if not got:
        return []
    tenants, models, regions, hours, wts = zip(*got, strict=True)
    # Rows grouped per series with numpy (one code per key, a stable sort), not a Python loop per row.
    code_of: dict[Key, int] = {}
    codes = np.fromiter(
        (code_of.setdefault(k, len(code_of)) for k in zip(tenants, models, regions, strict=True)),
        dtype=np.int64,
        count=len(got),
    )
    hour_of = np.asarray(hours, dtype=np.int64)
    wt_of = np.asarray([0.0 if w is None else float(w) for w in wts])
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(code_of) + 1))
    end_h = int(end.timestamp()) // 3600
    out = []
    for key in sorted(code_of):
        if key[1] not in r:
            continue  # a model no longer in the catalogue has no R, so no CU
        if wanted is not None and key not in wanted:
            continue
        c = code_of[key]
        take = order[bounds[c] : bounds[c + 1]]
        at = hour_of[take]
        first = int(at.min())
        values = np.zeros(end_h - first)
        np.add.at(values, at - first, wt_of[take] / 3600.0 / r[key[1]])
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
