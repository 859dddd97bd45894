"""Atlas's keys as Headroom entitlements (issue 24.1, `manage.py import_atlas`): the plan, then apply.

Each mapped API key becomes one entitlement of the scope (tenant, project, model, region, class):
- class from Atlas's priority: critical/high → reserved, normal → shared, low → best_effort;
- budgets: budget_unit `tokens` (Atlas counts upstream total_tokens), daily/monthly from
  daily_limit/monthly_limit (0 in Atlas means no limit: none here either), UTC;
- request rate: max_rps = rate_per_sec, burst = burst (default: the rate, as the service does);
- CU (one rule, shown per key): Atlas's rate_per_sec is requests/s, so
  CU = rate_per_sec × the model's weighted tokens per request at the import envelope's medians
  (prompt_p50 + w_out × output_p50, capacity.units.weighted_tokens) ÷ R, rounded up to 0.1 CU;
  with no rate, the daily budget spread over the day at a peak factor of 3:
  CU = daily_limit ÷ 86,400 s × 3 ÷ R (tokens taken as weighted tokens), rounded up to 0.1 CU;
- today's and this month's usage are carried into the scope's period buckets (set, not added).

The plan (a dry run) reads and compares; `apply` writes the same plan through the entitlement
services (audited, the importer as actor) and seeds the buckets, so the diff a dry run prints is
what an apply writes, and a second apply finds every key `unchanged`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from admission import budgets, keys
from admission.atlas_source import AtlasInputError, AtlasLimits, AtlasUsage, MapRow, mask, parse_limits, parse_usage
from admission.backends.base import Limits, periods_at
from capacity.periods import DAILY, TOKENS
from capacity.units import TokenWeights, weighted_tokens
from entitlements.models import Entitlement, Project, Region, ServedModel, Tenant
from entitlements.selectors import scope_entitlements
from entitlements.services import DERIVE, Envelope, entitlement_amend, entitlement_grant

CLASS_OF = {"critical": "reserved", "high": "reserved", "normal": "shared", "low": "best_effort"}
PEAK_FACTOR = 3
DAY_S = 86_400
CU_STEP = Decimal("0.1")
TZ = "UTC"  # Atlas names its counters by the UTC date
# The workload envelope imported keys get: Atlas has none, so a general chat shape (the CU rule
# reads its medians); max_concurrency is derived by the grant for the pool it lands in.
ATLAS_ENVELOPE = Envelope(
    max_prompt_tokens=8000, max_output_tokens=2000, prompt_p50=1000, prompt_p95=4000, output_p50=200,
    output_p95=800, max_concurrency=DERIVE, ttft_p99_ms=2000, tpot_p99_ms=200,
)  # fmt: skip
FIELDS = ("cu", "daily_budget", "monthly_budget", "budget_unit", "budget_tz", "max_rps", "burst")


@dataclass
class KeyPlan:
    """One key's line of the diff: where it lands, what it gets, and what applying changes."""

    api_key: str
    scope: str  # tenant/project model@region
    traffic_class: str
    cu: Decimal
    derivation: str
    daily_budget: int | None
    monthly_budget: int | None
    max_rps: float | None
    burst: int | None
    usage: AtlasUsage
    action: str = "create"  # create / update / unchanged
    changes: list[str] = field(default_factory=list)
    entitlement: Entitlement | None = None
    target: tuple[Tenant, Project | None, ServedModel, Region] | None = None

    def wanted(self) -> dict[str, Any]:
        return {"cu": self.cu, "daily_budget": self.daily_budget, "monthly_budget": self.monthly_budget,
                "budget_unit": TOKENS, "budget_tz": TZ, "max_rps": self.max_rps, "burst": self.burst}  # fmt: skip


@dataclass
class ImportPlan:
    keys: list[KeyPlan]
    problems: list[AtlasInputError]
    unmapped: list[str]


def derive_cu(lim: AtlasLimits, model: ServedModel) -> tuple[Decimal, str]:
    """CU for a key and the arithmetic in words (see the module's docstring)."""
    r = model.r_wt_per_s
    if lim.rate_per_sec is not None:
        env = ATLAS_ENVELOPE
        per_req = weighted_tokens(prompt=env.prompt_p50, output=env.output_p50,
                                  weights=TokenWeights(w_out=model.w_out, w_cached=model.w_cached))  # fmt: skip
        cu = _round_up(lim.rate_per_sec * per_req / r)
        return cu, (
            f"{lim.rate_per_sec:g} req/s × {per_req:,.0f} wt/req ({env.prompt_p50} + {model.w_out:g}×{env.output_p50})"
            f" ÷ R {r:,.0f} = {cu} CU"
        )
    if lim.daily:
        cu = _round_up(lim.daily / DAY_S * PEAK_FACTOR / r)
        return cu, f"{lim.daily:,} tok/day ÷ 86,400 s × peak {PEAK_FACTOR} ÷ R {r:,.0f} = {cu} CU"
    raise ValueError("no rate_per_sec nor daily_limit to derive CU from")


def plan(
    rows: list[MapRow], atlas: dict[str, tuple[dict[str, str], str | None, str | None]], defaults: AtlasLimits,
    backend: Any, problems: list[AtlasInputError], unmapped: list[str],
) -> ImportPlan:  # fmt: skip
    """Every mapped key's line of the diff against the database and the store as they are now."""
    out: list[KeyPlan] = []
    scopes: dict[tuple[int, int | None, int, int, str], str] = {}
    for row in rows:
        try:
            kp = _plan_key(row, atlas[row.api_key], defaults, backend)
        except AtlasInputError as exc:
            problems.append(exc)
            continue
        assert kp.target is not None
        t, p, m, r = kp.target
        sk = (t.pk, p.pk if p else None, m.pk, r.pk, kp.traffic_class)
        if sk in scopes:  # one key per scope: its usage is the scope's buckets
            problems.append(AtlasInputError(f"map line {row.line}", "api_key",
                                            f"its scope {kp.scope} {kp.traffic_class} is already {scopes[sk]}'s"))  # fmt: skip
            continue
        scopes[sk] = mask(row.api_key)
        out.append(kp)
    return ImportPlan(out, problems, unmapped)


def _plan_key(
    row: MapRow, got: tuple[dict[str, str], str | None, str | None], defaults: AtlasLimits, backend: Any
) -> KeyPlan:
    where = f"map line {row.line}"
    tenant = Tenant.objects.filter(slug=row.tenant).first()
    if tenant is None:
        raise AtlasInputError(where, "tenant", f"unknown tenant '{row.tenant}'")
    project = None
    if row.project:
        project = Project.objects.filter(tenant=tenant, slug=row.project).first()
        if project is None:
            raise AtlasInputError(where, "project", f"unknown project '{row.project}' of {row.tenant}")
    model = ServedModel.objects.filter(slug=row.model).first()
    if model is None:
        raise AtlasInputError(where, "model", f"unknown model '{row.model}'")
    region = Region.objects.filter(slug=row.region).first()
    if region is None:
        raise AtlasInputError(where, "region", f"unknown region '{row.region}'")
    h, day, month = got
    lim = parse_limits(row.api_key, h, defaults)
    usage = parse_usage(row.api_key, day, month)
    try:
        cu, how = derive_cu(lim, model)
    except ValueError as exc:
        raise AtlasInputError(f"limits:{mask(row.api_key)}", "rate_per_sec", str(exc)) from None
    rate = lim.rate_per_sec
    kp = KeyPlan(
        api_key=row.api_key, scope=f"{row.tenant}/{row.project or '-'} {row.model}@{row.region}",
        traffic_class=CLASS_OF[lim.priority], cu=cu, derivation=how + (" (Atlas defaults)" if lim.from_defaults else ""),
        daily_budget=lim.daily or None, monthly_budget=lim.monthly or None, max_rps=rate,
        burst=None if rate is None else (lim.burst or max(1, math.ceil(rate))), usage=usage,
        target=(tenant, project, model, region),
    )  # fmt: skip
    ent = (
        scope_entitlements(tenant=tenant, project=project, model=model, region=region, traffic_class=kp.traffic_class)
        .order_by("pk")
        .first()
    )
    if ent is not None:
        kp.entitlement = ent
        kp.changes = [f for f, v in kp.wanted().items() if _differs(getattr(ent, f), v)]
        kp.changes += [f"usage {k}" for k, (key, n) in _buckets(kp, ent.pool_id, backend).items()
                       if backend.used(key) != float(n)]  # fmt: skip
        kp.action = "update" if kp.changes else "unchanged"
    return kp


def apply(p: ImportPlan, actor: Any, backend: Any) -> None:
    """Write the plan: grant or amend each key's entitlement (audited as `actor`), then set its
    period buckets to Atlas's usage. A key the services refuse (oversold pool, envelope too long
    for the model) becomes a problem naming the field; the other keys still land."""
    for kp in list(p.keys):
        reason = f"import_atlas: Atlas key {mask(kp.api_key)}"
        try:
            if kp.action == "create":
                assert kp.target is not None
                t, proj, m, r = kp.target
                w = kp.wanted()
                kp.entitlement = entitlement_grant(
                    actor=actor, reason=reason, tenant=t, project=proj, model=m, region=r,
                    traffic_class=kp.traffic_class, cu=w.pop("cu"), starts_at=datetime.now(UTC), ends_at=None,
                    envelope=ATLAS_ENVELOPE, **w,
                )  # fmt: skip
            elif kp.action == "update":
                assert kp.entitlement is not None
                ent_changes = {f: v for f, v in kp.wanted().items() if f in kp.changes}
                if ent_changes:
                    kp.entitlement = entitlement_amend(actor=actor, reason=reason, entitlement=kp.entitlement,
                                                       **ent_changes)  # fmt: skip
        except ValidationError as exc:
            name, msgs = (
                next(iter(exc.message_dict.items())) if hasattr(exc, "error_dict") else ("entitlement", exc.messages)
            )
            p.problems.append(AtlasInputError(f"key {mask(kp.api_key)}", name, "; ".join(msgs)))
            p.keys.remove(kp)
            continue
        assert kp.entitlement is not None
        lim = _limits(kp, kp.entitlement.pool_id, backend)
        for per in lim.periods:
            backend.seed_period_usage(per, TZ, float(kp.usage.day if per.kind == DAILY else kp.usage.month))


def scope_key(kp: KeyPlan) -> str:
    """The scope's key in the admission store (admission.params: slugs joined, '' for no project)."""
    assert kp.target is not None
    t, p, m, r = kp.target
    return ":".join((t.slug, p.slug if p else "", m.slug, r.slug, kp.traffic_class))


def _limits(kp: KeyPlan, pool_id: int, backend: Any) -> Limits:
    spec = budgets.LimitSpec(TOKENS, TZ, _f(kp.daily_budget), _f(kp.monthly_budget), kp.max_rps, _f(kp.burst))
    lim = budgets.limits_for(spec, keys.tag(backend.prefix, pool_id), scope_key(kp))
    assert lim is not None
    return lim


def _buckets(kp: KeyPlan, pool_id: int, backend: Any) -> dict[str, tuple[str, int]]:
    """{'day'|'month': (the current period bucket's key, the usage it should hold)} for the key's budgets."""
    now = backend.period_now() if hasattr(backend, "period_now") else backend.clock()
    out = {}
    for per in _limits(kp, pool_id, backend).periods:
        pid = periods_at(per.kind, TZ, now)[1][0]
        name = "day" if per.kind == DAILY else "month"
        out[name] = (f"{per.key}:{pid}", kp.usage.day if per.kind == DAILY else kp.usage.month)
    return out


def carried(kp: KeyPlan) -> str:
    parts = []
    if kp.daily_budget is not None:
        parts.append(f"d {kp.usage.day:,}")
    if kp.monthly_budget is not None:
        parts.append(f"m {kp.usage.month:,}")
    return " ".join(parts) or "-"


def _differs(have: Any, want: Any) -> bool:
    if have is None or want is None:
        return have is not want
    if isinstance(want, Decimal):
        return Decimal(str(have)) != want
    if isinstance(want, float):
        return float(have) != want
    return bool(have != want)


def _f(v: int | None) -> float | None:
    return None if v is None else float(v)


def _round_up(x: float) -> Decimal:
    """Up to the next 0.1 CU (at least 0.1): an imported key never gets less than Atlas allowed."""
    tenths = max(1, math.ceil(round(x * 10, 9)))
    return (Decimal(tenths) * CU_STEP).quantize(CU_STEP)


__all__ = ["ATLAS_ENVELOPE", "CLASS_OF", "ImportPlan", "KeyPlan", "apply", "carried", "derive_cu", "plan"]
