"""sold(t) day by day for a pool set, in one query (issue 52's availability read).

A launch window starts and ends at midnight UTC (portal.selectors.window_of), so the most sold over
any window of whole days is the largest of those days' own peaks: a day's peak is all a date search
needs, not every step. The database sweeps the same events the approval's peak sweeps
(entitlements.selectors.sold_events_sql) and returns, per pool and per day that holds an event, the
highest running total, the last one (carried into the days after), and the first event's instant (a
day whose first event is at midnight does not inherit the day before's total).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection

from entitlements.models import Entitlement
from entitlements.models.supply import as_cu
from entitlements.selectors import Window, overlapping, sold_events_sql


def _day(value: Any) -> date:
    return value if isinstance(value, date) and not isinstance(value, datetime) else date.fromisoformat(str(value)[:10])


def _at_midnight(value: Any) -> bool:
    t = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return t.time() == time(0)


def daily_sold_peaks(pool_ids: Iterable[int], start: datetime, days: int | None) -> dict[int, list[Decimal]]:
    """pool → the most sold at any instant of each day from `start` (a midnight), `days` days long; None:
    through the last day anything changes, the list's last value holding for every day after it."""
    ids = sorted(set(pool_ids))
    end = None if days is None else start + timedelta(days=days)
    window = Window(start, end)
    qs = overlapping(Entitlement.objects.filter(pool_id__in=ids, traffic_class__counts_as_sold=True), start, end)
    events, params = sold_events_sql(qs, window, "pool_id")
    day_sql, day_params = connection.ops.datetime_cast_date_sql("t", [], "UTC")
    sql = (
        f"WITH {events}, "  # noqa: S608 - the ORM's own SQL and parameters
        f"days(k, day, t, total, rn) AS (SELECT k, {day_sql}, t, total, "
        f"ROW_NUMBER() OVER (PARTITION BY k, {day_sql} ORDER BY t DESC) FROM steps) "
        "SELECT k, day, MAX(total), MAX(CASE WHEN rn = 1 THEN total END), MIN(t) FROM days GROUP BY k, day "
        "ORDER BY k, day"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [*params, *day_params, *day_params])
        rows = cur.fetchall()
    first = start.date()
    out: dict[int, list[Decimal]] = {pk: [] for pk in ids}
    carry: dict[int, Decimal] = {pk: Decimal(0) for pk in ids}
    for pk, day, peak, last, first_t in rows:
        i = (_day(day) - first).days
        series = out[pk]
        if days is not None and i >= days:
            continue
        series.extend([carry[pk]] * (i - len(series)))  # days without an event hold the total carried in
        # SQLite sums decimals as floats: CU are stored to 3 decimals, so rounding restores them.
        top = as_cu(peak or 0)
        if not _at_midnight(first_t):
            top = max(top, carry[pk])
        series.append(max(Decimal(0), top))
        carry[pk] = max(Decimal(0), as_cu(last or 0))
    for pk in ids:
        series = out[pk]
        if days is not None:
            series.extend([carry[pk]] * (days - len(series)))
        else:
            series.append(carry[pk])  # the total after the last event, for every later day
    return out
