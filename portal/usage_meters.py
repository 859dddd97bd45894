"""Used ÷ bought per entitlement (issue 22), as the tenant home and the entitlement page show it.

Every figure is the evidence statement's own (telemetry.statement, docs/contract.md §8) for a named period, so a
meter's value is the statement's `used.share` (or `used.peak_share_1m` for the peak) for that period:

- now: the last hour, `used.share`;
- last 24 h peak: the busiest minute of the last 24 hours, `used.peak_share_1m` (minute rollups);
- period: the statement's default period (the last 30 days), `used.share`.

An entitlement with a period budget (issue 23) also shows each budget period's share, from
telemetry.budgets.budget_usage.

The per-model total is Σ used CU-hours ÷ Σ bought CU-hours over the same period.

`usages_of` computes these figures for many entitlements at once in two queries (their history in one,
and every window's rollup sums in ONE grouped query, telemetry.usage.Scopes.read), so the tenant home's
query count does not grow with its entitlements (docs/pages.md); `tenant_usages` caches them per tenant
for at most 30 s within the minute. The figures are the statement's own functions
(entitlements.bought.bought_steps, telemetry.statement.minute_figures, telemetry.usage.ratio,
telemetry.budgets.budget_usage), fed with rows read once; tests/portal/test_usage_meters.py and
tests/portal/test_meters_one_query.py check each meter equals telemetry.statement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.cache import cache

from capacity.periods import DAILY, MONTHLY, REQUESTS, next_start, period_start
from entitlements.bought import bought_steps, cu_hours, histories
from entitlements.models import Entitlement
from telemetry import usage
from telemetry.budgets import BUDGET_FIELDS, budget_usage, spent
from telemetry.statement import minute_figures, resolve_period

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


DECISIONS = ("admit", "complete")
CACHE_S = 30  # the tenant home's meters are cached this long (at most), per minute they were read in


def _used_cu_h(summed: dict[int, dict[str, dict[str, float]]], ent: Entitlement) -> float:
    r_wt = ent.model.r_wt_per_s
    return summed[ent.pk]["complete"]["act"] / r_wt / 3600 if r_wt else 0.0


def _budget_windows(ents: list[Entitlement], now: datetime) -> set[tuple[datetime, datetime]]:
    """Every distinct budget period the entitlements are in (those sharing a time zone share their day and
    month), as budget_usage asks for it."""
    windows: set[tuple[datetime, datetime]] = set()
    for ent in ents:
        for kind, limit in ((DAILY, ent.daily_budget), (MONTHLY, ent.monthly_budget)):
            if limit is not None:
                start = period_start(kind, now.timestamp(), ent.budget_tz)
                end = min(next_start(kind, start), now)
                windows.add((start.astimezone(UTC), end.astimezone(UTC)))
    return windows


def usages_of(ents: list[Entitlement], now: datetime) -> dict[int, Usage]:
    """Entitlement pk → its meters, for entitlements read with tenant, project, model and region: their
    history in one query, every window's rollup sums in one more (telemetry.usage.Scopes.read)."""
    if not ents:
        return {}
    history = histories(ents)
    spans = {key: resolve_period(now - span, now, now) for key, _, span in WINDOWS}
    spans["period"] = resolve_period(None, None, now)
    windows: dict[Any, tuple[datetime, datetime]] = {"now": spans["now"], "period": spans["period"]}
    windows |= {w: w for w in _budget_windows(ents, now)}
    summed, minutes = usage.Scopes(ents).read(
        windows, {"peak": spans["peak"]}, fields=BUDGET_FIELDS, decisions=DECISIONS
    )

    def budget_used(ent: Entitlement, unit: str, start: datetime, end: datetime) -> float:
        """used_between's answer, from the sums read above."""
        got = summed[(start, end)][ent.pk]
        return spent(unit, got["admit"] if unit == REQUESTS else got["complete"])

    out = {}
    for ent in ents:
        # No history rows: bought_steps falls back to the row as it is now, without a query.
        steps = {key: bought_steps(ent, *span, history=history.get(ent.pk, [])) for key, span in spans.items()}
        now_bought, period_bought = cu_hours(steps["now"]), cu_hours(steps["period"])
        period_used = _used_cu_h(summed["period"], ent)
        peak = minute_figures(steps["peak"], minutes["peak"].get(ent.pk, {}), ent.model.r_wt_per_s)["peak"]
        meters = [
            Meter(
                "now",
                WINDOWS[0][1],
                *spans["now"],
                usage.ratio(_used_cu_h(summed["now"], ent), now_bought),
                "used.share",
            ),
            Meter("peak", WINDOWS[1][1], *spans["peak"], peak, "used.peak_share_1m"),
            Meter(
                "period",
                "last 30 days",
                *spans["period"],
                usage.ratio(period_used, period_bought),
                "used.share",
                used_cu_h=round(period_used, 6),
                bought_cu_h=round(period_bought, 6),
            ),
        ]
        out[ent.pk] = Usage(meters, budget=budget_usage(ent, now, used_fn=budget_used))
    return out


def _cache_key(tenant_pk: int, ents: list[Entitlement], now: datetime) -> str:
    """The tenant, the minute (every meter's period is floored to it) and what of each entitlement the
    meters read (a grant, an amendment, a revocation or a new budget changes the key)."""
    seen = [
        (e.uuid, e.version, e.cu, e.starts_at, e.ends_at, e.revoked_at, e.daily_budget, e.monthly_budget,
         e.budget_unit, e.budget_tz)
        for e in ents
    ]  # fmt: skip
    digest = hashlib.sha256(repr(seen).encode()).hexdigest()[:32]
    return f"usage-meters:{tenant_pk}:{now.replace(second=0, microsecond=0).isoformat()}:{digest}"


def tenant_usages(tenant_pk: int, ents: list[Entitlement], now: datetime) -> dict[int, Usage]:
    """usages_of for one tenant's entitlements, cached for at most CACHE_S within the minute they were
    read in: a page polled by many people reads the rollups once."""
    key = _cache_key(tenant_pk, ents, now)
    got = cache.get(key)
    if got is None:
        got = usages_of(ents, now)
        cache.set(key, got, CACHE_S)
    return got


def usage_of(ent: Entitlement, now: datetime) -> Usage:
    return usages_of([ent], now)[ent.pk]


def model_totals(usages: list[tuple[Entitlement, Usage]]) -> list[ModelTotal]:
    totals: dict[str, ModelTotal] = {}
    for ent, u in usages:
        period = u.meters[-1]
        t = totals.setdefault(ent.model.slug, ModelTotal(ent.model.slug, start=period.start, end=period.end))
        t.used_cu_h += period.used_cu_h
        t.bought_cu_h += period.bought_cu_h
        t.entitlements += 1
    return sorted(totals.values(), key=lambda t: t.model)
