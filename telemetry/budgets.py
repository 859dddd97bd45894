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
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, Sum
from django.utils import timezone

from capacity.periods import DAILY, MONTHLY, REQUESTS, TOKENS, next_start, period_id, period_start
from entitlements.models import Entitlement
from telemetry.models import HourRollup, MinuteRollup

HOUR = timedelta(hours=1)


def _scope(ent: Entitlement) -> Q:
    """Its own events and the unattributed events of its exact scope (as the statement counts them)."""
    return Q(entitlement=str(ent.uuid)) | Q(
        entitlement="", tenant=ent.tenant.slug, project=ent.project.slug if ent.project is not None else "",
        model=ent.model.slug, region=ent.region.slug, traffic_class=ent.traffic_class_id,
    )  # fmt: skip


def _pieces(start: datetime, end: datetime) -> list[tuple[Any, datetime, datetime]]:
    first = start.replace(minute=0, second=0, microsecond=0)
    first = first if first == start else first + HOUR
    last = end.replace(minute=0, second=0, microsecond=0)
    if last <= first:
        return [(MinuteRollup, start, end)]
    return [(MinuteRollup, start, first), (HourRollup, first, last), (MinuteRollup, last, end)]


def used_between(ent: Entitlement, unit: str, start: datetime, end: datetime) -> float:
    """What the entitlement spent of a budget counted in `unit` over [start, end)."""
    decision = "admit" if unit == REQUESTS else "complete"
    total = 0.0
    for model, a, b in _pieces(start, end):
        if b <= a:
            continue
        got = (
            model.objects.filter(_scope(ent), decision=decision, bucket__gte=a, bucket__lt=b)
            .aggregate(n=Sum("requests"), wt=Sum("actual_wt"), p=Sum("prompt_tokens"), o=Sum("output_tokens"))
        )  # fmt: skip
        if unit == REQUESTS:
            total += got["n"] or 0
        elif unit == TOKENS:
            total += (got["p"] or 0) + (got["o"] or 0)
        else:
            total += got["wt"] or 0.0
    return total


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
