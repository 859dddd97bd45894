"""The availability's old read, kept only as bench/availability.py's baseline (it was entitlements/sold_days.py).

sold(t) day by day for a pool set, in one query. `as_steps` hands its days to portal.availability as a
step function (each midnight holding that day's peak): the availability reads whole-day windows only, so
the answer is the old one, and the bench can time the endpoint with either read, interleaved.

A launch window starts and ends at midnight UTC (portal.selectors.window_of), so the most sold over
any window of whole days is the largest of those days' own peaks: a day's peak is all a date search
needs, not every step. The database sweeps the same events the approval's peak sweeps
(entitlements.selectors.sold_events_sql) and returns, per pool and per day that holds an event, the
highest running total, the last one (carried into the days after: the running sum of the days' changes),
and whether the day's first event is at midnight (such a day does not inherit the day before's total: the
instant's events apply before its total is read). Only these small values cross from the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
from django.db import connection

from entitlements.models import Entitlement
from entitlements.models.supply import as_cu
from entitlements.selectors import Window, overlapping, sold_events_sql
from entitlements.sold_profile import Steps, us

DAY_US = 86_400_000_000


def _day(value: Any) -> date:
    return value if isinstance(value, date) and not isinstance(value, datetime) else date.fromisoformat(str(value)[:10])


def daily_sold_peaks(pool_ids: Iterable[int], start: datetime, days: int | None) -> dict[int, list[Decimal]]:
    """pool → the most sold at any instant of each day from `start` (a midnight), `days` days long; None:
    through the last day anything changes, the list's last value holding for every day after it."""
    ids = sorted(set(pool_ids))
    end = None if days is None else start + timedelta(days=days)
    window = Window(start, end)
    qs = overlapping(Entitlement.objects.filter(pool_id__in=ids, traffic_class__counts_as_sold=True), start, end)
    events, params = sold_events_sql(qs, window, "pool_id")
    day_sql, day_params = connection.ops.datetime_cast_date_sql("t", [], "UTC")
    time_sql, time_params = connection.ops.datetime_cast_time_sql("MIN(t)", [], "UTC")
    midnight = connection.ops.adapt_timefield_value(time(0))
    # A day's last total is the running sum of every day's change up to it: a window over the few day rows,
    # where ranking each day's steps by time again cost a second sort of every step.
    sql = (
        f"WITH {events}, "  # noqa: S608 - the ORM's own SQL and parameters
        f"days(k, day, peak, delta, at_midnight) AS (SELECT k, {day_sql}, MAX(total), SUM(delta), "
        f"CASE WHEN {time_sql} = %s THEN 1 ELSE 0 END FROM steps GROUP BY k, {day_sql}) "
        "SELECT k, day, peak, SUM(delta) OVER (PARTITION BY k ORDER BY day), at_midnight FROM days ORDER BY k, day"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [*params, *day_params, *time_params, midnight, *day_params])
        rows = cur.fetchall()
    first = start.date()
    out: dict[int, list[Decimal]] = {pk: [] for pk in ids}
    carry: dict[int, Decimal] = {pk: Decimal(0) for pk in ids}
    for pk, day, peak, last, at_midnight in rows:
        i = (_day(day) - first).days
        series = out[pk]
        if days is not None and i >= days:
            continue
        series.extend([carry[pk]] * (i - len(series)))  # days without an event hold the total carried in
        # SQLite sums decimals as floats: CU are stored to 3 decimals, so rounding restores them.
        top = as_cu(peak or 0)
        if not at_midnight:
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


def as_steps(pool_ids: Iterable[int], window: Window) -> dict[int, Steps]:
    """portal.availability's sold_steps, answered from the old day-by-day read."""
    days = None if window.end is None else (window.end - window.start).days
    got = daily_sold_peaks(pool_ids, window.start, days)
    t0 = us(window.start)
    return {
        pk: Steps(t0 + DAY_US * np.arange(len(v), dtype=np.int64), np.array([int(x * 1000) for x in v], dtype=np.int64))
        for pk, v in got.items()
    }
