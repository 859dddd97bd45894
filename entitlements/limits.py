"""Period budgets and request-rate limits of an entitlement (issue 23, docs/contract.md §5), in one place.

A budget caps what a scope spends per calendar day and/or month in `budget_tz`, counted in
`budget_unit`: `wt` (weighted tokens, as the rate bucket counts), `tokens` (plain prompt + output
tokens, as Atlas counts its upstream `total_tokens`) or `requests`. `max_rps` / `burst` is a
request-count token bucket beside the token rate. Every field is optional; none set: no limit.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.core.exceptions import ValidationError

from capacity.periods import (  # noqa: F401 - re-exported: the entitlement side names periods through here
    DAILY,
    MONTHLY,
    REQUESTS,
    TOKENS,
    UNITS,
    WT,
    next_start,
    period_id,
    period_start,
    periods_around,
    prev_start,
)

UNIT_CHOICES = [(WT, "weighted tokens"), (TOKENS, "tokens (prompt + output)"), (REQUESTS, "requests")]
DEFAULT_TZ = "UTC"
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
        # 0 is a budget that refuses every request (BUDGET_EXHAUSTED): Atlas's limit of 0 (docs/contract.md §8)
        if v is not None and not 0 <= v <= MAX_BUDGET:
            errors[name] = f"must be at least 0 (0 refuses every request) and at most {MAX_BUDGET:,}"
    rps, burst = values.get("max_rps"), values.get("burst")
    if rps is not None and not 0 < rps <= MAX_RPS:
        errors["max_rps"] = f"must be greater than 0 and at most {MAX_RPS:,.0f}"
    if burst is not None:
        if rps is None:
            errors["burst"] = "needs max_rps (the rate the burst refills at)"
        elif burst < 1:
            errors["burst"] = "must be at least 1 (one request)"
    return errors
