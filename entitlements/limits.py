"""Period budgets and request-rate limits of an entitlement (issue 23, CONTRACT §5), in one place.

A budget caps what a scope spends per calendar day and/or month in `budget_tz`, counted in
`budget_unit`: `wt` (weighted tokens, as the rate bucket counts), `tokens` (plain prompt + output
tokens, as Atlas counts its upstream `total_tokens`) or `requests`. `max_rps` / `burst` is a
request-count token bucket beside the token rate. Every field is optional; none set: no limit.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.core.exceptions import ValidationError

WT, TOKENS, REQUESTS = "wt", "tokens", "requests"
UNITS = (WT, TOKENS, REQUESTS)
UNIT_CHOICES = [(WT, "weighted tokens"), (TOKENS, "tokens (prompt + output)"), (REQUESTS, "requests")]
DEFAULT_TZ = "UTC"
DAILY, MONTHLY = "daily", "monthly"
# The fields, in the order the API, the snapshot and the history show them.
LIMIT_FIELDS = ("daily_budget", "monthly_budget", "budget_unit", "budget_tz", "max_rps", "burst")
MAX_BUDGET = 10**15  # within a double's exact integers, whatever the unit
MAX_RPS = 1_000_000.0


def validate_tz(name: str) -> None:
    """An IANA zone name the platform's tz database knows (`Asia/Tokyo`, `UTC`)."""
    if not isinstance(name, str) or not name or name not in _zones():
        raise ValidationError(f"'{name}' is not an IANA time zone name (e.g. UTC, Europe/Berlin, Asia/Tokyo)")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"'{name}' is not an IANA time zone name") from exc


_ZONES: frozenset[str] | None = None


def _zones() -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones()) | {"UTC"}
    return _ZONES


def check(values: dict[str, Any]) -> dict[str, str]:
    """Cross-field rules on an entitlement's limits (→ field → message; empty: fine)."""
    errors: dict[str, str] = {}
    if values.get("budget_unit") not in UNITS:
        errors["budget_unit"] = f"must be one of {', '.join(UNITS)}"
    for name in ("daily_budget", "monthly_budget"):
        v = values.get(name)
        if v is not None and not 0 < v <= MAX_BUDGET:
            errors[name] = f"must be greater than 0 and at most {MAX_BUDGET:,}"
    rps, burst = values.get("max_rps"), values.get("burst")
    if rps is not None and not 0 < rps <= MAX_RPS:
        errors["max_rps"] = f"must be greater than 0 and at most {MAX_RPS:,.0f}"
    if burst is not None:
        if rps is None:
            errors["burst"] = "needs max_rps (the rate the burst refills at)"
        elif burst < 1:
            errors["burst"] = "must be at least 1 (one request)"
    return errors


# ---- periods: computed in the budget's zone, as epoch seconds ------------------------------------


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
