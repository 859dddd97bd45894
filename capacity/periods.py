"""Budget periods (issue 23): a day or a month in an IANA time zone, as epoch seconds.

Pure Python (no Django): the admission stores, the snapshot's library mode and the entitlement
pages all name and bound periods the same way. A period bucket's key ends with `period_id`, so
it resets by key change at the boundary and never refills in between.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

WT, TOKENS, REQUESTS = "wt", "tokens", "requests"
UNITS = (WT, TOKENS, REQUESTS)
DAILY, MONTHLY = "daily", "monthly"


def period_start(kind: str, t: float, tz: str) -> datetime:
    """The local midnight starting the day / month containing epoch `t` in `tz`."""
    local = datetime.fromtimestamp(t, ZoneInfo(tz))
    if kind == DAILY:
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_start(kind: str, start: datetime) -> datetime:
    """The local midnight after `start`'s period (DST-safe: built from the calendar date, not +24 h)."""
    if kind == DAILY:
        d = start.date() + timedelta(days=1)
    else:
        d = (start.replace(day=28) + timedelta(days=4)).replace(day=1).date()
    return datetime(d.year, d.month, d.day, tzinfo=start.tzinfo)


def prev_start(kind: str, start: datetime) -> datetime:
    day = start.date() - timedelta(days=1)
    d = day if kind == DAILY else day.replace(day=1)
    return datetime(d.year, d.month, d.day, tzinfo=start.tzinfo)


def period_id(kind: str, start: datetime) -> str:
    """A period's name in keys and on the statement: '20261130' (day) or '202611' (month)."""
    return start.strftime("%Y%m%d" if kind == DAILY else "%Y%m")


def periods_around(kind: str, t: float, tz: str) -> list[tuple[str, float, float]]:
    """[(id, start, end)] for the previous, current and next period around epoch `t`: the store
    picks among them by its own clock, which may sit on the other side of a boundary from ours."""
    cur = period_start(kind, t, tz)
    starts = [prev_start(kind, cur), cur, next_start(kind, cur)]
    starts.append(next_start(kind, starts[-1]))
    return [(period_id(kind, a), a.timestamp(), b.timestamp()) for a, b in zip(starts, starts[1:], strict=False)]
