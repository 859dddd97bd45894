"""What each rule kind reads, and when it holds. Each returns {subject key: Finding}.

Telemetry kinds read the minute rollups of the rule's window (additive sums per tenant, model,
region, entitlement, decision and reason). Rollups keep token sums and latency histograms, not
length percentiles, so envelope drift compares the window's mean prompt and output lengths with
the envelope's p50 (a mean above p50 × threshold % means the shape moved), plus any
OUTSIDE_ENVELOPE throttles. A pool rule reads the telemetry of the pool's model and region.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from alerts.models import AlertRule
from capacity.planning import percent, replay
from entitlements.models import Entitlement, Project, Tenant
from entitlements.reasons import OUTSIDE_ENVELOPE, REASONS
from entitlements.selectors import active_at
from forecasting.gap import supply_gap
from forecasting.models import ForecastRun
from forecasting.peak_to_mean import planning_answer, recorded_workload
from forecasting.shortfalls import shortfalls
from telemetry.budgets import budget_usage
from telemetry.usage import sums as rollup_sums
from telemetry.usd_charged import month_bounds, month_charged
from telemetry.usd_charged import prices as usd_prices

Kind = AlertRule.Kind

# Which scopes a kind makes sense for: supply and forecasts are the platform's business.
SCOPES: dict[str, tuple[str, ...]] = {
    Kind.USE_OVER_BOUGHT: ("tenant", "pool", "platform"),
    Kind.TENANT_THROTTLES_OVER: ("tenant", "pool", "platform"),
    Kind.PLATFORM_THROTTLES: ("tenant", "pool", "platform"),
    Kind.LATENCY_MISSES: ("tenant", "pool", "platform"),
    Kind.ENVELOPE_DRIFT: ("tenant", "pool", "platform"),
    Kind.SUPPLY_GAP_ORDER_BY: ("pool", "platform"),
    Kind.FORECAST_RUN_FAILED: ("platform",),
    Kind.BUDGET_USED: ("tenant", "pool", "platform"),
}

# threshold: (default, lowest allowed, highest allowed, unit)
THRESHOLDS: dict[str, tuple[float, float, float, str]] = {
    Kind.USE_OVER_BOUGHT: (90, 1, 1000, "% of bought"),
    Kind.TENANT_THROTTLES_OVER: (5, 0, 100, "% of requests"),
    Kind.PLATFORM_THROTTLES: (0, 0, 1e9, "throttles (fires above)"),
    Kind.LATENCY_MISSES: (0, 0, 1e9, "missed requests (fires above)"),
    Kind.ENVELOPE_DRIFT: (150, 100, 1000, "% of the envelope's p50"),
    Kind.SUPPLY_GAP_ORDER_BY: (14, 0, 365, "days"),
    Kind.FORECAST_RUN_FAILED: (0, 0, 0, "(none)"),
    Kind.BUDGET_USED: (80, 1, 100, "% of a daily or monthly budget"),
}


@dataclass(frozen=True)
class Finding:
    summary: str
    tenant: Tenant | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What one evaluation pass shares between rules (the supply gap is computed once)."""

    now: datetime
    cache: dict[str, Any] = field(default_factory=dict)

    def supply_gap(self) -> list[dict[str, Any]]:
        if "gap" not in self.cache:
            self.cache["gap"] = supply_gap(today=self.now.date())[1]
        return self.cache["gap"]


# What a telemetry rule sums per key, decision and reason over its window (telemetry.usage.FIELDS).
RULE_FIELDS = ("n", "act", "prompt", "out", "slo", "slo_n")


def _scope_q(rule: AlertRule) -> Q:
    if rule.scope == AlertRule.Scope.TENANT:
        return Q(tenant=rule.tenant.slug)  # type: ignore[union-attr]
    if rule.scope == AlertRule.Scope.POOL:
        return Q(model=rule.pool.model.slug, region=rule.pool.region.slug)  # type: ignore[union-attr]
    return Q()


def _rows(rule: AlertRule, now: datetime, *keys: str) -> list[dict[str, Any]]:
    since = now - timedelta(minutes=rule.window_minutes)
    return rollup_sums("minute", _scope_q(rule), since, now, by=(*keys, "decision", "reason"), fields=RULE_FIELDS)


def _entitlements(rule: AlertRule, now: datetime) -> list[Entitlement]:
    qs = active_at(Entitlement.objects.select_related("tenant", "model", "region"), now)
    if rule.scope == AlertRule.Scope.TENANT:
        qs = qs.filter(tenant=rule.tenant)
    elif rule.scope == AlertRule.Scope.POOL:
        qs = qs.filter(pool=rule.pool)
    return list(qs)


def _tenants(slugs: set[str]) -> dict[str, Tenant]:
    return {t.slug: t for t in Tenant.objects.filter(slug__in=slugs)}


def _label(e: Entitlement) -> str:
    return f"{e.tenant.slug} {e.model.slug}@{e.region.slug} {e.traffic_class_id}"


def use_over_bought(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    """Actual weighted tokens of completed requests vs CU × R × window, per active entitlement."""
    used: dict[str, float] = {}
    for r in _rows(rule, ctx.now, "entitlement"):
        if r["decision"] == "complete" and r["entitlement"]:
            used[r["entitlement"]] = used.get(r["entitlement"], 0.0) + (r["act"] or 0.0)
    out = {}
    window_s = rule.window_minutes * 60
    for e in _entitlements(rule, ctx.now):
        bought = e.rate_wt_per_s * window_s
        if bought <= 0:
            continue
        pct = 100.0 * used.get(str(e.uuid), 0.0) / bought
        if pct > rule.threshold:
            detail: dict[str, Any] = {
                "entitlement": str(e.uuid),
                "used_pct": round(pct, 2),
                "used_wt": used.get(str(e.uuid), 0.0),
            }
            out[f"entitlement:{e.uuid}"] = Finding(
                f"{_label(e)} used {pct:.0f} % of its {e.cu} CU over {rule.window_minutes} min"
                + _grow_advice(e, ctx.now - timedelta(minutes=rule.window_minutes), ctx.now, detail),
                e.tenant,
                detail,
            )
    return out


def _grow_advice(e: Entitlement, start: datetime, end: datetime, detail: dict[str, Any]) -> str:
    """Whether to grow, by the planning answer on the window's recorded traffic (the rule right-size
    and grow use, docs/planning.md): "grow to X CU" only when the replay at the CU bought is over
    the class's target and the answer's own check holds; otherwise nothing is advised."""
    w = recorded_workload(e, start, end)
    if not len(w):
        return ""
    answer = planning_answer(e, w)
    now = replay(w, float(e.cu), float(e.model.r_wt_per_s or 1.0), float(settings.ADMISSION_BUCKET_DEPTH_S))
    if not answer.holds or answer.cu_to_buy <= float(e.cu):
        return ""
    detail["planning"] = {**answer.to_dict(), "replay_at_current": now.to_dict()}
    return f"; grow to {answer.check}; at the {float(e.cu):.1f} CU bought {percent(now.throttled_share)}"


def tenant_throttles_over(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    """Throttles the tenant is responsible for, as a share of its attempts (admits + throttles)."""
    attempts: dict[str, int] = {}
    own: dict[str, int] = {}
    for r in _rows(rule, ctx.now, "tenant"):
        if r["decision"] == "complete":
            continue
        attempts[r["tenant"]] = attempts.get(r["tenant"], 0) + r["n"]
        reason = REASONS.get(r["reason"])
        if r["decision"] == "throttle" and reason is not None and reason.responsible == "tenant":
            own[r["tenant"]] = own.get(r["tenant"], 0) + r["n"]
    tenants = _tenants(set(attempts))
    out = {}
    for slug, n in attempts.items():
        pct = 100.0 * own.get(slug, 0) / n if n else 0.0
        if pct > rule.threshold and slug in tenants:
            out[f"tenant:{slug}"] = Finding(
                f"{slug}: {pct:.1f} % of {_count(n, 'request')} throttled for the tenant's own limits "
                f"over {rule.window_minutes} min",
                tenants[slug],
                {"tenant": slug, "throttled_pct": round(pct, 2), "attempts": n, "throttled": own.get(slug, 0)},
            )
    return out


def _per_scope(rule: AlertRule, ctx: Context, pick: Callable[[dict[str, Any]], int], what: str) -> dict[str, Finding]:
    """Counts per (tenant,) model and region: tenant rules per their scope, others per model and region."""
    by_tenant = rule.scope == AlertRule.Scope.TENANT
    keys = ("tenant", "model", "region") if by_tenant else ("model", "region")
    counts: dict[tuple[str, ...], int] = {}
    for r in _rows(rule, ctx.now, *keys):
        k = tuple(r[x] for x in keys)
        counts[k] = counts.get(k, 0) + pick(r)
    out = {}
    for k, n in counts.items():
        if n > rule.threshold:
            label = f"{k[0]} {k[1]}@{k[2]}" if by_tenant else f"{k[0]}@{k[1]}"
            out[":".join(k)] = Finding(
                f"{label}: {n} {what} over {rule.window_minutes} min",
                rule.tenant if by_tenant else None,
                {**dict(zip(keys, k, strict=True)), "count": n},
            )
    return out


def platform_throttles(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    def pick(r: dict[str, Any]) -> int:
        reason = REASONS.get(r["reason"])
        return r["n"] if r["decision"] == "throttle" and reason is not None and reason.responsible != "tenant" else 0

    return _per_scope(rule, ctx, pick, "throttles the platform is responsible for")


def latency_misses(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    def pick(r: dict[str, Any]) -> int:
        return int((r["slo_n"] or 0) - (r["slo"] or 0)) if r["decision"] == "complete" else 0

    return _per_scope(rule, ctx, pick, "requests missed their latency SLO")


def envelope_drift(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    sums: dict[str, list[float]] = {}  # entitlement → [completed, prompt, output, outside-envelope throttles]
    for r in _rows(rule, ctx.now, "entitlement"):
        s = sums.setdefault(r["entitlement"], [0, 0, 0, 0])
        if r["decision"] == "complete":
            s[0] += r["n"]
            s[1] += r["prompt"] or 0
            s[2] += r["out"] or 0
        elif r["decision"] == "throttle" and r["reason"] == OUTSIDE_ENVELOPE:
            s[3] += r["n"]
    out = {}
    k = rule.threshold / 100.0
    for e in _entitlements(rule, ctx.now):
        n, prompt, output, outside = sums.get(str(e.uuid), [0, 0, 0, 0])
        mean_p = prompt / n if n else 0.0
        mean_o = output / n if n else 0.0
        reasons = []
        if n and mean_p > e.prompt_p50 * k:
            reasons.append(f"mean prompt {mean_p:,.0f} tokens vs p50 {e.prompt_p50:,}")
        if n and mean_o > e.output_p50 * k:
            reasons.append(f"mean output {mean_o:,.0f} tokens vs p50 {e.output_p50:,}")
        if outside:
            reasons.append(f"{_count(int(outside), 'request')} outside the envelope")
        if reasons:
            out[f"entitlement:{e.uuid}"] = Finding(
                f"{_label(e)} drifted from its envelope: {'; '.join(reasons)}",
                e.tenant,
                {
                    "entitlement": str(e.uuid),
                    "mean_prompt": round(mean_p, 1),
                    "mean_output": round(mean_o, 1),
                    "outside_envelope": int(outside),
                    "basis": "window means vs envelope p50 (rollups keep sums, not length percentiles)",
                },
            )
    return out


def supply_gap_order_by_within(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    """The newest forecast against supply in every scenario and case planning shows (expected, upside,
    stress; healthy and after failure): the pool's most urgent shortfall, as planning's action list picks it."""
    out = {}
    horizon = ctx.now.date() + timedelta(days=rule.threshold)
    for row in ctx.supply_gap():
        if rule.scope == AlertRule.Scope.POOL and row["pool"] != rule.pool.slug:  # type: ignore[union-attr]
            continue
        shorts = shortfalls(row)
        if not shorts:
            continue
        first = shorts[0]
        if first["late"] or first["order_by"] <= horizon:
            when = "is late" if first["late"] else f"is {first['order_by']:%Y-%m-%d}"
            where = f"{first['scenario']}, {first['case_label']}"
            n = first["replicas_short"]
            what = (
                f"the order-by date for {n} more {'replica' if n == 1 else 'replicas'} ({where}) {when}"
                if n is not None
                else f"no order of its replicas closes the gap ({where}; order-by {when.removeprefix('is ')}): "
                f"{first['order']['reason']}"
            )
            out[f"pool:{row['pool']}"] = Finding(
                f"{row['pool']}: {what}",
                None,
                {
                    "pool": row["pool"],
                    "scenario": first["scenario"],
                    "case": first["case"],
                    "order_by": first["order_by"].isoformat(),
                    "late": first["late"],
                    "first_week": first["first_week"].isoformat(),
                    "replicas_short": first["replicas_short"],
                },
            )
    return out


def forecast_run_failed(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    """Holds while the newest finished run failed; a later successful run resolves it."""
    run = ForecastRun.objects.filter(status__in=ForecastRun.TERMINAL).order_by("-created_at").first()
    if run is None or run.status != ForecastRun.Status.FAILED:
        return {}
    return {
        "forecast": Finding(
            f"forecast run {run.id} failed: {run.error[:160]}",
            None,
            {"run": str(run.id), "error": run.error[:500]},
        )
    }


def budget_used(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    """Each period budget (issue 23) of an active entitlement, settled use in the current day / month
    of the budget's zone (telemetry.budgets): at the threshold (80 % by default) one finding, and a
    second one once the budget is spent (100 %), so one rule tells both. Their keys name the period:
    a new day or month resolves them and starts afresh."""
    out = {}
    for e in _entitlements(rule, ctx.now):
        if e.daily_budget is None and e.monthly_budget is None:
            continue
        usage = budget_usage(e, at=ctx.now) or {}
        for kind in ("daily", "monthly"):
            b = usage.get(kind)
            if not b:
                continue
            pct = 100.0 * b["share"]
            detail = {"entitlement": str(e.uuid), "period": b["period"], "unit": usage["unit"], "limit": b["limit"],
                      "used": b["used"], "used_pct": round(pct, 2), "resets_at": b["resets_at"]}  # fmt: skip
            key = f"budget:{e.uuid}:{kind}:{b['period']}"
            what = f"{_label(e)} {kind} budget {b['period']}"
            if pct >= rule.threshold:
                out[key] = Finding(f"{what}: {pct:.0f} % used ({b['used']:,.0f} of {b['limit']:,} {usage['unit']})",
                                   e.tenant, detail)  # fmt: skip
            if pct >= 100:
                out[key + ":spent"] = Finding(f"{what} is spent: throttled until {b['resets_at']}", e.tenant, detail)
    return out


USD_LEVELS = (50.0, 80.0, 100.0)  # % of a $ budget at which it is told (issue 51.3), the rule's own threshold too


def usd_budget_used(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    """Each tenant's and project's $ budget (issue 51.3), charged this month (telemetry.usd_charged):
    one finding at 50 %, 80 % (or the rule's threshold) and 100 %; the month names them, so a new
    month resolves them. A pool rule watches no $ budget (it spans pools)."""
    if rule.scope == AlertRule.Scope.POOL:
        return {}
    tenants = Tenant.objects.all() if rule.tenant is None else Tenant.objects.filter(pk=rule.tenant.pk)
    targets: list[tuple[Tenant, Project | None, float]] = [
        (t, None, float(t.budget_usd or 0.0)) for t in tenants.filter(budget_usd__isnull=False)
    ]
    for pr in Project.objects.filter(tenant__in=tenants, budget_usd__isnull=False).select_related("tenant"):
        targets.append((pr.tenant, pr, float(pr.budget_usd or 0.0)))
    if not targets:
        return {}
    price = usd_prices()
    start, end = month_bounds(ctx.now)
    out = {}
    for t, p, limit in targets:
        used = month_charged(t, p, ctx.now, price)
        pct = 100.0 * used / limit if limit else 100.0
        who = t.slug + (f"/{p.slug}" if p else "")
        month = start.strftime("%Y-%m")
        detail = {"tenant": t.slug, "project": p.slug if p else None, "month": month, "limit_usd": limit,
                  "charged_usd": round(used, 2), "used_pct": round(pct, 2), "resets_at": end.isoformat()}  # fmt: skip
        for level in sorted({*USD_LEVELS, float(rule.threshold)}):
            if pct >= level:
                out[f"usd:{who}:{month}:{level:g}"] = Finding(
                    f"{who} $ budget {month}: {pct:.0f} % charged (${used:,.2f} of ${limit:,.2f})"
                    + (f"; refused until {end:%-d %B}" if level >= 100 else ""), t, detail)  # fmt: skip
    return out


def budget_and_usd_used(rule: AlertRule, ctx: Context) -> dict[str, Finding]:
    return budget_used(rule, ctx) | usd_budget_used(rule, ctx)


EVALUATORS: dict[str, Callable[[AlertRule, Context], dict[str, Finding]]] = {
    Kind.USE_OVER_BOUGHT: use_over_bought,
    Kind.TENANT_THROTTLES_OVER: tenant_throttles_over,
    Kind.PLATFORM_THROTTLES: platform_throttles,
    Kind.LATENCY_MISSES: latency_misses,
    Kind.ENVELOPE_DRIFT: envelope_drift,
    Kind.SUPPLY_GAP_ORDER_BY: supply_gap_order_by_within,
    Kind.FORECAST_RUN_FAILED: forecast_run_failed,
    Kind.BUDGET_USED: budget_and_usd_used,
}


def _count(n: int, noun: str) -> str:
    """A count as people read it in an alert: grouped, the noun in the right number ("1 request", "11,768 requests")."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
