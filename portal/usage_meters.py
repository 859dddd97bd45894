"""Used ÷ bought per entitlement (issue 22), as the tenant home and the entitlement page show it.

Every figure is the evidence statement's own (telemetry.statement, CONTRACT §8) for a named period, so a
meter's value is the statement's `used.share` (or `used.peak_share_1m` for the peak) for that period:

- now: the last hour, `used.share`;
- last 24 h peak: the busiest minute of the last 24 hours, `used.peak_share_1m` (minute rollups);
- period: the statement's default period (the last 30 days), `used.share`.

An entitlement with a period budget (issue 23) also shows each budget period's share, from
telemetry.budgets.budget_usage.

The per-model total is Σ used CU-hours ÷ Σ bought CU-hours over the same period.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from entitlements.models import Entitlement
from telemetry.budgets import budget_usage
from telemetry.statement import resolve_period, statement

WINDOWS = (("now", "last hour", timedelta(hours=1)), ("peak", "24 h peak minute", timedelta(hours=24)))


@dataclass
class Meter:
    key: str
    label: str
    start: datetime
    end: datetime
    share: float | None  # the statement's figure, unrounded beyond what it returns
    field: str  # which statement figure it is: used.share or used.peak_share_1m
    used_cu_h: float = 0.0
    bought_cu_h: float = 0.0

    @property
    def max(self) -> float:
        # A borrowing entitlement can use more than it bought: keep the value inside the meter's range.
        return max(1.0, self.share or 0.0)

    @property
    def level(self) -> str:
        s = self.share or 0.0
        return "hot" if s >= 0.9 else "warm" if s >= 0.7 else "ok"


@dataclass
class Usage:
    meters: list[Meter]
    budget: Any = None  # issue 23's telemetry.budgets.budget_usage(ent): None without a budget

    @property
    def budget_periods(self) -> list[tuple[str, dict[str, Any]]]:
        """(daily|monthly, {limit, used, share, period, resets_at}) for the periods the entitlement has."""
        if not self.budget:
            return []
        return [(k, self.budget[k]) for k in ("daily", "monthly") if self.budget.get(k)]


@dataclass
class ModelTotal:
    model: str
    used_cu_h: float = 0.0
    bought_cu_h: float = 0.0
    entitlements: int = 0
    start: datetime | None = None
    end: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def share(self) -> float | None:
        return round(self.used_cu_h / self.bought_cu_h, 6) if self.bought_cu_h else None

    @property
    def max(self) -> float:
        return max(1.0, self.share or 0.0)


def usage_of(ent: Entitlement, now: datetime) -> Usage:
    meters = []
    for key, label, span in WINDOWS:
        start, end = resolve_period(now - span, now, now)
        used = statement(ent, start, end)["used"]
        figure = "peak_share_1m" if key == "peak" else "share"
        meters.append(Meter(key, label, start, end, used[figure], f"used.{figure}"))
    start, end = resolve_period(None, None, now)
    st = statement(ent, start, end)
    meters.append(
        Meter(
            "period",
            "last 30 days",
            start,
            end,
            st["used"]["share"],
            "used.share",
            used_cu_h=st["used"]["cu_hours"],
            bought_cu_h=st["bought"]["cu_hours"],
        )
    )
    return Usage(meters, budget=budget_usage(ent, now))


def model_totals(usages: list[tuple[Entitlement, Usage]]) -> list[ModelTotal]:
    totals: dict[str, ModelTotal] = {}
    for ent, u in usages:
        period = u.meters[-1]
        t = totals.setdefault(ent.model.slug, ModelTotal(ent.model.slug, start=period.start, end=period.end))
        t.used_cu_h += period.used_cu_h
        t.bought_cu_h += period.bought_cu_h
        t.entitlements += 1
    return sorted(totals.values(), key=lambda t: t.model)
