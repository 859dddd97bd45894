"""Used ÷ bought per entitlement (issue 22), as the tenant home and the entitlement page show it.

Every figure is the evidence statement's own (telemetry.statement, CONTRACT §8) for a named period, so a
meter's value is the statement's `used.share` (or `used.peak_share_1m` for the peak) for that period:

- now: the last hour, `used.share`;
- last 24 h peak: the busiest minute of the last 24 hours, `used.peak_share_1m` (minute rollups);
- period: the statement's default period (the last 30 days), `used.share`.

An entitlement with a period budget (issue 23) also shows each budget period's share, from
telemetry.budgets.budget_usage.

The per-model total is Σ used CU-hours ÷ Σ bought CU-hours over the same period.

`usages_of` computes these figures for many entitlements at once, in a fixed number of grouped queries
(their history in one, each window's rollups in one per rollup level, grouped by scope), so the tenant
home's query count does not grow with its entitlements (docs/pages.md). The sums and the figures from
them are the statement's own functions (bought_steps, _minute_figures, _ratio, budget_usage), fed with
rows read once; tests/portal/test_usage_meters.py checks each meter equals telemetry.statement.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, Sum

from capacity.periods import DAILY, MONTHLY, REQUESTS, TOKENS, next_start, period_start
from entitlements.models import Entitlement, EntitlementHistory
from telemetry.budgets import budget_usage
from telemetry.models import MinuteRollup

# The statement's own pieces, read here for many entitlements at once (one rule, one module).
from telemetry.statement import _minute_figures, _pieces, _ratio, _when, bought_steps, resolve_period

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


Key = tuple[str, str, str, str, str]  # (tenant, project, model, region, traffic class) of a rollup row
_COLUMNS = ("entitlement", "tenant", "project", "model", "region", "traffic_class")


def _key(ent: Entitlement) -> Key:
    project = ent.project.slug if ent.project is not None else ""
    return (ent.tenant.slug, project, ent.model.slug, ent.region.slug, ent.traffic_class_id)


class _Scopes:
    """Which entitlements a rollup row counts for, as telemetry.statement._scope decides for one: its own
    rows, plus the unattributed rows of its exact scope (shared by every entitlement of that scope)."""

    def __init__(self, ents: list[Entitlement]) -> None:
        self.by_uuid = {str(e.uuid): e.pk for e in ents}
        self.by_key: dict[Key, list[int]] = defaultdict(list)
        for e in ents:
            self.by_key[_key(e)].append(e.pk)
        self.q = Q(entitlement__in=list(self.by_uuid)) | Q(entitlement="", tenant__in={e.tenant.slug for e in ents})

    def owners(self, row: dict[str, Any]) -> list[int]:
        if row["entitlement"]:
            pk = self.by_uuid.get(row["entitlement"])
            return [pk] if pk is not None else []
        return self.by_key.get((row["tenant"], row["project"], row["model"], row["region"], row["traffic_class"]), [])


def _summed(scopes: _Scopes, start: datetime, end: datetime) -> dict[int, dict[str, dict[str, float]]]:
    """pk → decision → {n, wt, p, o} over [start, end): one grouped query per rollup level."""
    out: dict[int, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for model, a, b in _pieces(start, end):
        if b <= a:
            continue
        rows = (
            model.objects.filter(  # type: ignore[attr-defined]  # _pieces yields the concrete rollup models
                scopes.q, decision__in=("admit", "complete"), bucket__gte=a, bucket__lt=b
            )
            .values(*_COLUMNS, "decision")
            .annotate(n=Sum("requests"), wt=Sum("actual_wt"), p=Sum("prompt_tokens"), o=Sum("output_tokens"))
            .order_by()
        )
        for r in rows:
            for pk in scopes.owners(r):
                acc = out[pk][r["decision"]]
                for k in ("n", "wt", "p", "o"):
                    acc[k] += r[k] or 0
    return out


def _per_minute(scopes: _Scopes, start: datetime, end: datetime) -> dict[int, dict[datetime, float]]:
    """pk → minute → settled wt over [start, end), minutes with none left out (as the statement's peak)."""
    rows = (
        MinuteRollup.objects.filter(scopes.q, decision="complete", bucket__gte=start, bucket__lt=end)
        .values(*_COLUMNS, "bucket")
        .annotate(wt=Sum("actual_wt"))
        .order_by()
    )
    out: dict[int, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        for pk in scopes.owners(r):
            out[pk][_when(r["bucket"])] += float(r["wt"] or 0)  # type: ignore[index]  # buckets are never NULL
    return {pk: {t: wt for t, wt in m.items() if wt} for pk, m in out.items()}


def _history(ents: list[Entitlement]) -> dict[int, list[Any]]:
    rows: dict[int, list[Any]] = defaultdict(list)
    qs = EntitlementHistory.objects.filter(entitlement_id__in=[e.pk for e in ents]).exclude(op="delete")
    for pk, at, snap in qs.order_by("entitlement_id", "pk").values_list("entitlement_id", "at", "snapshot"):
        rows[pk].append((at, snap))
    return rows


def _cu_hours(steps: list[Any]) -> float:
    return sum(float(s.cu) * (s.end - s.start).total_seconds() / 3600 for s in steps)


def _used_cu_h(summed: dict[int, dict[str, dict[str, float]]], ent: Entitlement) -> float:
    r_wt = ent.model.r_wt_per_s
    return summed[ent.pk]["complete"]["wt"] / r_wt / 3600 if r_wt else 0.0


def usages_of(ents: list[Entitlement], now: datetime) -> dict[int, Usage]:
    """Entitlement pk → its meters, for entitlements read with tenant, project, model and region."""
    if not ents:
        return {}
    scopes = _Scopes(ents)
    history = _history(ents)
    spans = {key: resolve_period(now - span, now, now) for key, _, span in WINDOWS}
    spans["period"] = resolve_period(None, None, now)
    summed = {key: _summed(scopes, *spans[key]) for key in ("now", "period")}
    minutes = _per_minute(scopes, *spans["peak"])
    budgets = _budget_sums(ents, scopes, now)
    out = {}
    for ent in ents:
        # No history rows: bought_steps falls back to the row as it is now, without a query.
        steps = {key: bought_steps(ent, *span, history=history.get(ent.pk, [])) for key, span in spans.items()}
        now_bought, period_bought = _cu_hours(steps["now"]), _cu_hours(steps["period"])
        peak_steps = steps["peak"]
        period_used = _used_cu_h(summed["period"], ent)
        peak = _minute_figures(peak_steps, minutes.get(ent.pk, {}), ent.model.r_wt_per_s)["peak"]
        meters = [
            Meter(
                "now", WINDOWS[0][1], *spans["now"], _ratio(_used_cu_h(summed["now"], ent), now_bought), "used.share"
            ),
            Meter("peak", WINDOWS[1][1], *spans["peak"], peak, "used.peak_share_1m"),
            Meter(
                "period",
                "last 30 days",
                *spans["period"],
                _ratio(period_used, period_bought),
                "used.share",
                used_cu_h=round(period_used, 6),
                bought_cu_h=round(period_bought, 6),
            ),
        ]
        out[ent.pk] = Usage(meters, budget=budget_usage(ent, now, used_fn=budgets.used))
    return out


class _BudgetSums:
    """Budget use for every entitlement with a budget: one grouped read per distinct budget period
    (entitlements sharing a time zone share their day and month), answered in used_between's terms."""

    def __init__(self) -> None:
        self.sums: dict[tuple[datetime, datetime], dict[int, dict[str, dict[str, float]]]] = {}

    def used(self, ent: Entitlement, unit: str, start: datetime, end: datetime) -> float:
        got = self.sums[(start, end)][ent.pk]
        if unit == REQUESTS:
            return got["admit"]["n"]
        if unit == TOKENS:
            return got["complete"]["p"] + got["complete"]["o"]
        return got["complete"]["wt"]


def _budget_sums(ents: list[Entitlement], scopes: _Scopes, now: datetime) -> _BudgetSums:
    sums = _BudgetSums()
    windows: set[tuple[datetime, datetime]] = set()
    for ent in ents:
        for kind, limit in ((DAILY, ent.daily_budget), (MONTHLY, ent.monthly_budget)):
            if limit is not None:
                start = period_start(kind, now.timestamp(), ent.budget_tz)
                end = min(next_start(kind, start), now)
                windows.add((start.astimezone(UTC), end.astimezone(UTC)))
    for w in windows:
        sums.sums[w] = _summed(scopes, *w)
    return sums


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
