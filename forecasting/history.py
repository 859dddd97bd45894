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
from django.db.models import BigIntegerField, Case, Func, IntegerField, QuerySet, Sum, Value, When

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
    # A series has `min_hours` hours when its first hour is at least that far before `end`: the keys with any
    # row before that hour. DISTINCT, not GROUP BY with MIN(bucket): SQLite's DISTINCT keeps only the keys,
    # where its GROUP BY sorted every row of the window first (4.0-4.6 s vs 1.0-1.7 s for 100 series × 36 weeks).
    before = end - HOUR * max(min_hours - 1, 0)
    rows = (
        HourRollup.objects.filter(bucket__gte=start, bucket__lt=before, decision__in=ARRIVED)
        .values_list("tenant", "model", "region")
        .distinct()
        .order_by()
    )
    return sorted((t, m, reg) for t, m, reg in rows if m in r)


class BucketHour(Func):
    """A bucket's hour in the form cheapest for the database to give and numpy to read. PostgreSQL: whole hours
    since 1970 as an integer (integer arithmetic, so an hour is never floored one below by a float's last
    digit). SQLite: the stored UTC text as it is, parsed by numpy in one call (`epoch_hours`); converting it in
    SQLite (strftime per row) cost more than the rest of the read."""

    output_field = BigIntegerField()
    convert_value = staticmethod(Func._convert_value_noop)  # type: ignore[attr-defined]  # private in Django

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="FLOOR(EXTRACT(EPOCH FROM %(expressions)s) / 3600)::bigint", **extra
        )

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # `|| ''`: an expression has no declared type, so the driver hands back the text (a bare datetime column
        # would be parsed per row into a datetime by the sqlite3 module's converter).
        return self.as_sql(compiler, connection, template="(%(expressions)s || '')", **extra)


def epoch_hours(hours: tuple[Any, ...]) -> np.ndarray:
    """BucketHour's column as whole hours since 1970: integers as they are, SQLite's UTC text parsed by numpy
    (floored to the hour like the integer form)."""
    if hours and isinstance(hours[0], str):
        return np.array(hours, dtype="datetime64[us]").astype(np.int64) // 3_600_000_000
    return np.asarray(hours, dtype=np.int64)


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
    rows = rows.annotate(hour=BucketHour("bucket"))
    named = sorted(set(keys)) if keys is not None else []
    if keys is not None:
        # A chunk's keys: the database numbers them (no key strings per row to fetch and group in Python), and
        # `tenant IN` is an equality on the (tenant, bucket) index, which SQLite's planner takes where a tenant
        # range lost to the bucket index once the key number was in the query.
        code = Case(
            *[When(tenant=t, model=m, region=g, then=Value(i)) for i, (t, m, g) in enumerate(named)],
            default=Value(-1),
            output_field=IntegerField(),
        )
        qs = rows.filter(tenant__in=sorted({k[0] for k in named})).annotate(code=code).values_list("code", "hour")
    else:
        qs = rows.values_list("tenant", "model", "region", "hour")
    sql, params = qs.annotate(wt=Sum("estimated_wt")).order_by().query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        got = cur.fetchall()
    if not got:
        return []
    *key_cols, hours, wts = zip(*got, strict=True)
    if keys is not None:
        codes = np.asarray(key_cols[0], dtype=np.int64)
    else:
        # Every series in the window: one code per key, in order of first appearance.
        code_of: dict[Key, int] = {}
        codes = np.fromiter(
            (code_of.setdefault(k, len(code_of)) for k in zip(*key_cols, strict=True)), dtype=np.int64, count=len(got)
        )
        named = list(code_of)
    hour_of = epoch_hours(hours)
    wt_of = np.asarray(wts, dtype=float)
    wt_of[np.isnan(wt_of)] = 0.0  # a NULL sum (never for a non-empty group of a NOT NULL column)
    # Rows grouped per series with numpy (a stable sort by code), not a Python loop per row.
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(named) + 1))
    end_h = int(end.timestamp()) // 3600
    out = []
    for c, key in sorted(enumerate(named), key=lambda ck: ck[1]):
        if key[1] not in r:
            continue  # a model no longer in the catalogue has no R, so no CU
        take = order[bounds[c] : bounds[c + 1]]
        if not len(take):
            continue  # a chunk's key with no rows in the window
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
