"""An entitlement's period budgets as used so far (issue 23): the statement's `budget` block and the
tenant home's meters read this.

Use is read from the rollups (hour rollups for whole hours, minute rollups for a period's ragged
edges: a local midnight in Asia/Kolkata is no hour boundary in UTC), in the budget's unit: settled
weighted tokens (`wt`), settled prompt + output tokens (`tokens`) or admitted requests (`requests`).
The admission store enforces the budget itself, in the same atomic step as the rate; this is the
settled account of it, so it lags the store by the reservations still in flight and by rollup delay.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from capacity.periods import DAILY, MONTHLY, REQUESTS, TOKENS, next_start, period_id, period_start
from entitlements.models import Entitlement
from telemetry.usage import period_sums, scope

BUDGET_FIELDS = ("n", "act", "prompt", "out")


def spent(unit: str, got: dict[str, Any]) -> float:
    """A budget's use in `unit` from rollup sums of BUDGET_FIELDS (admits for requests, completions else)."""
    if unit == REQUESTS:
        return float(got["n"] or 0)
    if unit == TOKENS:
        return float((got["prompt"] or 0) + (got["out"] or 0))
    return float(got["act"] or 0.0)


def used_between(ent: Entitlement, unit: str, start: datetime, end: datetime) -> float:
    """What the entitlement spent of a budget counted in `unit` over [start, end)."""
    decision = "admit" if unit == REQUESTS else "complete"
    rows = period_sums(scope(ent), start, end, by=(), fields=BUDGET_FIELDS, decision=decision)
    return sum((spent(unit, got) for got in rows), 0.0)


def budget_usage(
    ent: Entitlement, at: datetime | None = None, used_fn: Callable[..., float] | None = None
) -> dict[str, Any] | None:
    """{unit, tz, daily: {limit, used, share, period, start, resets_at} | None, monthly: …} for the
    periods containing `at` (default now); None when the entitlement has no budget. `used_fn`: a
    stand-in for used_between with its arguments, reading figures the caller summed for many
    entitlements at once (portal.usage_meters)."""
    if ent.daily_budget is None and ent.monthly_budget is None:
        return None
    t = at or timezone.now()
    out: dict[str, Any] = {"unit": ent.budget_unit, "tz": ent.budget_tz}
    for kind, limit in ((DAILY, ent.daily_budget), (MONTHLY, ent.monthly_budget)):
        if limit is None:
            out[kind] = None
            continue
        start = period_start(kind, t.timestamp(), ent.budget_tz)
        end = next_start(kind, start)
        used = (used_fn or used_between)(ent, ent.budget_unit, start.astimezone(UTC), min(end, t).astimezone(UTC))
        out[kind] = {
            "limit": limit, "used": round(used, 3), "share": _share(used, limit), "period": period_id(kind, start),
            "start": start.isoformat(), "resets_at": end.isoformat(),
        }  # fmt: skip
    return out


def _share(used: float, limit: int) -> float:
    """Used ÷ limit; a budget of 0 (Atlas's limit 0: every request refused) is spent from the start."""
    return round(used / limit, 6) if limit else 1.0
