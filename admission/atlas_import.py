"""Atlas's keys as Headroom entitlements (issue 24.1, `manage.py import_atlas`): the plan, then apply.

Each scope (tenant, project, model, region, class) the map sends keys to becomes one entitlement:
- class from Atlas's priority: critical/high → reserved, normal → shared, low → best_effort (a priority
  Atlas does not know reads as normal, as in Atlas: admission.atlas_source);
- budgets: budget_unit `tokens` (Atlas counts upstream total_tokens), daily/monthly from
  daily_limit/monthly_limit, UTC; a limit of 0, which refuses every request in Atlas, is a budget of 0
  (BUDGET_EXHAUSTED);
- request rate: max_rps = rate_per_sec, burst = burst (default: the rate, as the service does);
- CU (one rule, shown per key): Atlas's rate_per_sec is requests/s, so
  CU = rate_per_sec × the model's weighted tokens per request at the import envelope's medians
  (prompt_p50 + w_out × output_p50, capacity.units.weighted_tokens) ÷ R, rounded up to 0.1 CU;
  with no rate, the daily budget spread over the day at a peak factor of 3:
  CU = daily_limit ÷ 86,400 s × 3 ÷ R (tokens taken as weighted tokens), rounded up to 0.1 CU;
- several keys on one scope (a team's keys): one entitlement with their limits summed (budgets, rate,
  burst, CU) and their usage summed. Headroom's gateway names the scope, not the key, so per-key budgets
  cannot be told apart in the serving path; the sum admits what the keys together could in Atlas;
- today's and this month's usage are carried into the scope's period buckets (admission.atlas_carry:
  the difference from the last import is added, so a second import with Atlas unchanged carries nothing).

The plan (a dry run) reads and compares; `apply` writes the same plan through the entitlement
services (audited, the importer as actor) and carries the usage, so the diff a dry run prints is
what an apply writes, and a second apply finds every scope `unchanged`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from admission import atlas_carry, budgets, keys
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
Target = tuple[Tenant, Project | None, ServedModel, Region]


@dataclass
class KeyPart:
    """One Atlas key as Atlas enforces it, before the keys of its scope are summed."""

    api_key: str
    line: int
    lim: AtlasLimits
    usage: AtlasUsage
    cu: Decimal
    derivation: str
    burst: int | None


@dataclass
class KeyPlan:
    """One scope's line of the diff: its keys, where they land, what they get, what applying changes."""

    parts: list[KeyPart]
    scope: str  # tenant/project model@region
    traffic_class: str
    cu: Decimal
    daily_budget: int | None
    monthly_budget: int | None
    max_rps: float | None
    burst: int | None
    usage: AtlasUsage
    target: Target
    action: str = "create"  # create / update / unchanged
    changes: list[str] = field(default_factory=list)
    entitlement: Entitlement | None = None
    carried: dict[str, float] = field(default_factory=dict)  # 'day'/'month' → what apply added
    before: dict[str, Any] = field(default_factory=dict)  # each changed field's value now (the diff's "old")

    @property
    def lowers_cu(self) -> bool:
        """An update that would give the scope less capacity than it has: never written silently."""
        return "cu" in self.before and Decimal(str(self.before["cu"])) > self.cu

    def change_words(self) -> list[str]:
        """The diff: `field old → new` for the entitlement's fields, the usage lines as they are."""
        want = self.wanted()
        return [f"{f} {_shown(self.before[f])} → {_shown(want[f])}" if f in self.before else f for f in self.changes]

    @property
    def api_key(self) -> str:
        return self.parts[0].api_key

    @property
    def keys_shown(self) -> str:
        return " + ".join(mask(p.api_key) for p in self.parts)

    @property
    def derivation(self) -> str:
        return " + ".join(p.derivation for p in self.parts) if len(self.parts) > 1 else self.parts[0].derivation

    @property
    def notes(self) -> list[str]:
        out = []
        for name, v in (("daily", self.daily_budget), ("monthly", self.monthly_budget)):
            if v == 0:
                out.append(f"{name} limit 0: every request refused (BUDGET_EXHAUSTED), as Atlas refuses it")
        for p in self.parts:
            out += [f"{mask(p.api_key)}: {n}" if len(self.parts) > 1 else n for n in p.lim.notes]
        if len(self.parts) > 1:
            out.append(f"{len(self.parts)} keys on one scope: limits and usage summed")
        if self.lowers_cu:
            out.append(f"lowers CU {_shown(self.before['cu'])} → {self.cu}: written only with --allow-lower")
        return out

    def wanted(self) -> dict[str, Any]:
        return {"cu": self.cu, "daily_budget": self.daily_budget, "monthly_budget": self.monthly_budget,
                "budget_unit": TOKENS, "budget_tz": TZ, "max_rps": self.max_rps, "burst": self.burst}  # fmt: skip


@dataclass
class ImportPlan:
    keys: list[KeyPlan]
    problems: list[AtlasInputError]
    unmapped: list[str]
    undecodable: list[str] = field(default_factory=list)  # Atlas key names that are not UTF-8 (skipped)


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
    """Every mapped scope's line of the diff against the database and the carried-usage ledger as they are now."""
    groups: dict[tuple[int, int | None, int, int, str], tuple[Target, str, list[KeyPart]]] = {}
    for row in rows:
        try:
            target, klass, part = _read_key(row, atlas[row.api_key], defaults)
        except AtlasInputError as exc:
            problems.append(exc)
            continue
        t, p, m, r = target
        sk = (t.pk, p.pk if p else None, m.pk, r.pk, klass)
        groups.setdefault(sk, (target, klass, []))[2].append(part)
    out = [_plan_scope(target, klass, parts, backend) for target, klass, parts in groups.values()]
    return ImportPlan(out, problems, unmapped)


def _read_key(
    row: MapRow, got: tuple[dict[str, str], str | None, str | None], defaults: AtlasLimits
) -> tuple[Target, str, KeyPart]:
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
    burst = None if rate is None else (lim.burst or max(1, math.ceil(rate)))
    how += " (Atlas defaults)" if lim.from_defaults else ""
    part = KeyPart(row.api_key, row.line, lim, usage, cu, how, burst)
    return (tenant, project, model, region), CLASS_OF[lim.priority], part


def _plan_scope(target: Target, klass: str, parts: list[KeyPart], backend: Any) -> KeyPlan:
    tenant, project, model, region = target
    rated = [p for p in parts if p.lim.rate_per_sec is not None]
    kp = KeyPlan(
        parts=parts, scope=f"{tenant.slug}/{project.slug if project else '-'} {model.slug}@{region.slug}",
        traffic_class=klass, cu=sum((p.cu for p in parts), Decimal("0.0")),
        daily_budget=_sum([p.lim.daily for p in parts]), monthly_budget=_sum([p.lim.monthly for p in parts]),
        # a key without a rate is unlimited in rate: so is the scope; likewise a key without a budget
        max_rps=sum(p.lim.rate_per_sec or 0.0 for p in rated) if len(rated) == len(parts) else None,
        burst=sum(p.burst or 0 for p in rated) if len(rated) == len(parts) else None,
        usage=AtlasUsage(sum(p.usage.day for p in parts), sum(p.usage.month for p in parts)), target=target,
    )  # fmt: skip
    ent = (
        scope_entitlements(tenant=tenant, project=project, model=model, region=region, traffic_class=klass)
        .order_by("pk")
        .first()
    )
    if ent is not None:
        kp.entitlement = ent
        kp.changes = [f for f, v in kp.wanted().items() if _differs(getattr(ent, f), v)]
        kp.before = {f: getattr(ent, f) for f in kp.changes}
        kp.changes += [f"usage {name}" for name, (bucket, _, total) in buckets(kp, ent.pool_id, backend).items()
                       if (atlas_carry.last_carried(bucket) or 0.0) != float(total)]  # fmt: skip
        kp.action = "update" if kp.changes else "unchanged"
    return kp


def apply(p: ImportPlan, actor: Any, backend: Any, *, allow_lower: bool = False) -> None:
    """Write the plan: grant or amend each scope's entitlement (audited as `actor`), then carry its
    usage (admission.atlas_carry). A scope the services refuse (oversold pool, envelope too long
    for the model) becomes a problem naming the field; the other scopes still land. An update that would
    lower an entitlement's CU is a problem too, unless `allow_lower`: nothing of that scope is written."""
    for kp in list(p.keys):
        reason = f"import_atlas: Atlas key {kp.keys_shown}"
        if kp.lowers_cu and not allow_lower:
            msg = f"would lower {kp.scope} from {_shown(kp.before['cu'])} to {kp.cu} CU; --allow-lower to write it"
            p.problems.append(AtlasInputError(f"key {kp.keys_shown}", "cu", msg))
            p.keys.remove(kp)
            continue
        try:
            if kp.action == "create":
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
            p.problems.append(AtlasInputError(f"key {kp.keys_shown}", name, "; ".join(msgs)))
            p.keys.remove(kp)
            continue
        assert kp.entitlement is not None
        for name, (bucket, end, total) in buckets(kp, kp.entitlement.pool_id, backend).items():
            kp.carried[name] = atlas_carry.carry(backend, bucket, end, float(total), reason)


def scope_key(kp: KeyPlan) -> str:
    """The scope's key in the admission store (admission.params: slugs joined, '' for no project)."""
    t, p, m, r = kp.target
    return ":".join((t.slug, p.slug if p else "", m.slug, r.slug, kp.traffic_class))


def _limits(kp: KeyPlan, pool_id: int, backend: Any) -> Limits:
    spec = budgets.LimitSpec(TOKENS, TZ, _f(kp.daily_budget), _f(kp.monthly_budget), kp.max_rps, _f(kp.burst))
    lim = budgets.limits_for(spec, keys.tag(backend.prefix, pool_id), scope_key(kp))
    assert lim is not None
    return lim


def buckets(kp: KeyPlan, pool_id: int, backend: Any) -> dict[str, tuple[str, float, int]]:
    """{'day'|'month': (the current period bucket's key, when that period ends, Atlas's usage for it)}
    for the scope's budgets."""
    now = backend.period_now() if hasattr(backend, "period_now") else backend.clock()
    out = {}
    for per in _limits(kp, pool_id, backend).periods:
        pid, _, end = periods_at(per.kind, TZ, now)[1]
        name = "day" if per.kind == DAILY else "month"
        out[name] = (f"{per.key}:{pid}", end, kp.usage.day if per.kind == DAILY else kp.usage.month)
    return out


def carried(kp: KeyPlan) -> str:
    parts = []
    if kp.daily_budget is not None:
        parts.append(f"d {kp.usage.day:,}")
    if kp.monthly_budget is not None:
        parts.append(f"m {kp.usage.month:,}")
    return " ".join(parts) or "-"


def _sum(values: list[int | None]) -> int | None:
    """Budgets of one scope's keys: a key without one leaves the scope unlimited."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _differs(have: Any, want: Any) -> bool:
    if have is None or want is None:
        return have is not want
    if isinstance(want, Decimal):
        return Decimal(str(have)) != want
    if isinstance(want, float):
        return float(have) != want
    return bool(have != want)


def _shown(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _f(v: int | None) -> float | None:
    return None if v is None else float(v)


def _round_up(x: float) -> Decimal:
    """Up to the next 0.1 CU (at least 0.1): an imported key never gets less than Atlas allowed."""
    tenths = max(1, math.ceil(round(x * 10, 9)))
    return (Decimal(tenths) * CU_STEP).quantize(CU_STEP)


__all__ = ["ATLAS_ENVELOPE", "CLASS_OF", "ImportPlan", "KeyPlan", "apply", "buckets", "carried", "derive_cu", "plan"]
