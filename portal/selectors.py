"""Reads for launch intake: who sees which requests, and what a request would need from supply."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from capacity.envelope import EnvelopeShape
from capacity.planning import PlanningAnswer, percent
from capacity.realisations import envelope_answer
from capacity.units import TokenWeights
from entitlements import roles
from entitlements.models import Entitlement, Pool, Region
from entitlements.pool_choice import choose_pool
from entitlements.selectors import Window, overlapping, pool_sold_peak, sold_entitlements, sold_steps_in
from entitlements.services import scope_pool_id
from forecasting.peak_to_mean import target_for
from portal.models import SCENARIOS, LaunchRequest, LaunchRequestEvent
from portal.sizing_fit import PoolFit, committed_fit, launch_shape, replicas_for, scenario_cu
from telemetry.minute_cv import EnvelopeCv, envelope_cv

Q3 = Decimal("0.001")


def launch_requests_visible_to(user: Any) -> QuerySet[LaunchRequest]:
    """Members see their tenant's requests; approvers and operators see all; anyone else none."""
    qs = LaunchRequest.objects.all()
    if roles.roles_of(user) & roles.STAFF_ROLES:
        return qs
    tenant = roles.tenant_of(user)
    if tenant is None:
        return qs.none()
    return qs.filter(tenant=tenant)


def events_of(req: LaunchRequest) -> QuerySet[LaunchRequestEvent]:
    return req.events.select_related("actor").order_by("at", "pk")


def day_start(d: date) -> datetime:
    return datetime.combine(d, time.min, tzinfo=UTC)


def window_of(launch_date: date, end_date: date | None) -> Window:
    return Window(day_start(launch_date), day_start(end_date) if end_date else None)


def cu_decimal(cu: float) -> Decimal:
    """Round up to 0.001 CU: a grant should cover the stated demand, never fall just short of it."""
    return Decimal(str(cu)).quantize(Q3, rounding=ROUND_CEILING)


@dataclass
class PoolSizing:
    pool: Pool
    cu_per_replica: float
    deliverable_cu: Decimal
    sold_peak_cu: Decimal
    headroom_cu: Decimal
    replicas: dict[str, int]  # scenario → replicas of this pool to carry it
    gap_cu: Decimal = Decimal(0)  # committed CU short here if the request landed in this pool
    chosen: bool = False
    fit: PoolFit | None = None  # the committed load against this pool's operating point (capacity.sizing)


def scenario_rps(req: LaunchRequest, name: str) -> float | None:
    """Requests per second of a scenario; a wt/min figure is turned back into requests with the
    envelope's typical request, as the CU conversion does."""
    basis, value = req.scenario(name)
    shape = launch_shape(req)
    if value is None or req.model is None or shape is None:
        return None
    if basis == "rps":
        return float(value)
    per_request = shape.wt_per_request(TokenWeights(req.model.w_out, req.model.w_cached))
    return float(value) / 60.0 / per_request if per_request else None


def _committed_rps(req: LaunchRequest) -> float | None:
    # portal.templatetags.latency_charts reads the committed rate through this name.
    return scenario_rps(req, "committed")


def target_of(req: LaunchRequest) -> float:
    """The request's target throttled share: its own, else its class's default (settings.
    PLANNING_TARGET_THROTTLED_SHARE, the calculator's and reconciliation's default too)."""
    own = getattr(req, "target_throttled_share", None)
    return float(own) if own is not None else target_for(req.traffic_class)


def cv_of(req: LaunchRequest) -> EnvelopeCv:
    """The request's minute-rate CV for the envelope replay and its source: its own, else what its tenant ×
    model × class recorded over 28 days, else the catalogue's default for its workload kind (telemetry.minute_cv,
    the calculator's rule too), with a warning where its own is below the recorded one."""
    own = getattr(req, "minute_rate_cv", None)
    return envelope_cv(
        stated=float(own) if own is not None else None,
        tenant=req.tenant.slug if req.tenant_id else None,
        model=req.model.slug if req.model is not None else None,
        traffic_class=req.traffic_class,
        kind=getattr(req, "workload_kind", None) or None,
    )


def minute_rate_cv_of(req: LaunchRequest) -> float:
    return cv_of(req).value


@lru_cache(maxsize=1024)
def _envelope_answer(
    rps: float, shape: EnvelopeShape, w_out: float, w_cached: float, r: float, target: float, depth: float, cv: float
) -> PlanningAnswer:
    # Deterministic (the same draws): the same request sizes the same on every keystroke, page and API read.
    return envelope_answer(
        rate_rps=rps,
        prompt=shape.prompt,
        output=shape.output,
        w_out=w_out,
        w_cached=w_cached,
        minute_rate_cv=cv,
        r_wt_per_s=r,
        target_throttled_share=target,
        depth_s=depth,
    )


def planning_answer(req: LaunchRequest, rps: float | None, cv: float | None = None) -> PlanningAnswer | None:
    """The planning answer (docs/planning.md) for `rps` requests/s of this request's envelope: the
    calculator's envelope answer (capacity.realisations.envelope_answer: 64 independent draws of
    over-dispersed minutes at the request's minute-rate CV, lengths through the envelope's quantiles,
    prompts uncached as the conversion counts them) through one bucket of ADMISSION_BUCKET_DEPTH_S,
    holding on 95 % of the draws at the request's target."""
    shape = launch_shape(req)
    if rps is None or rps < 0 or shape is None or req.model is None:
        return None
    m = req.model
    return _envelope_answer(
        float(rps),
        shape,
        float(m.w_out),
        float(m.w_cached),
        float(m.r_wt_per_s),
        target_of(req),
        float(settings.ADMISSION_BUCKET_DEPTH_S),
        minute_rate_cv_of(req) if cv is None else cv,
    )


@dataclass
class RegionSizing:
    region: Region
    pools: list[PoolSizing] = field(default_factory=list)

    @property
    def gap_cu(self) -> Decimal | None:
        """Committed CU that no pool in the region can take (None: no pool serves the model here)."""
        return min((p.gap_cu for p in self.pools), default=None)


@dataclass
class Sizing:
    cu: dict[str, Decimal | None]  # scenario → CU per region (None: not enough input yet)
    regions: list[RegionSizing]
    window: Window | None
    counts_as_sold: bool
    missing: list[str]  # labels of the fields the figures still need
    how: ConversionShown | None = None  # the conversion with this request's numbers (None: no model yet)
    # Per scenario, the planning answer its CU is (docs/planning.md); None until rate and envelope.
    planning: dict[str, PlanningAnswer | None] = field(default_factory=dict)
    target_throttled_share: float | None = None
    target_is_default: bool = True
    traffic_class: str = ""
    minute_rate_cv: float | None = None  # the replay's, the request's own or the default
    minute_rate_cv_is_default: bool = True
    minute_rate_cv_source: str = ""  # words: stated, recorded (with the measurement) or the catalogue's
    minute_rate_cv_origin: str = ""  # "stated" | "recorded" | "catalogue" (telemetry.minute_cv.EnvelopeCv)
    workload_kind: str = ""  # the request's; its catalogue CV is used only when the origin is "catalogue"
    cv_warnings: tuple[dict[str, Any], ...] = ()

    @property
    def target_text(self) -> str:
        """The target as people read it and as the field takes it: "0.1 % of requests (0.001)"."""
        t = self.target_throttled_share
        return "" if t is None else f"{percent(t)} of requests throttled ({t:g})"

    @property
    def minute_rate_cv_text(self) -> str:
        """The replay's minute-rate CV as the field takes it: "0.21" ("0, steady Poisson arrivals")."""
        cv = self.minute_rate_cv
        return "" if cv is None else f"{cv:g}" + (", steady Poisson arrivals" if cv == 0 else "")

    @property
    def planned(self) -> PlanningAnswer | None:
        """The committed scenario's answer: what an approval grants per region."""
        return self.planning.get("committed")

    @property
    def scenarios(self) -> list[tuple[str, Decimal | None, PlanningAnswer | None]]:
        """(scenario, CU per region, its planning answer) rows for the panel."""
        return [(name, self.cu.get(name), self.planning.get(name)) for name in SCENARIOS]


@dataclass
class ConversionShown:
    """What the sizing panel prints as its formula: the very terms scenario_cu computed with."""

    model: str
    r_wt_per_s: float  # R: weighted tokens per second that one CU carries (the conversion factor)
    w_out: float
    prompt_mean: float | None = None  # lognormal means through p50 and p95, capped at the max
    output_mean: float | None = None
    wt_per_request: float | None = None
    lines: dict[str, str] = field(default_factory=dict)  # scenario → "value × wt ÷ R = CU at the mean rate"


def _mean_cu(req: LaunchRequest, name: str) -> Decimal | None:
    """The scenario's mean-rate conversion (portal.sizing_fit.scenario_cu): the CU its average load
    takes, shown beside the planning answer (busier minutes need more)."""
    basis, value = req.scenario(name)
    if value is None or req.model is None or (basis == "rps" and launch_shape(req) is None):
        return None
    m = req.model
    return cu_decimal(
        scenario_cu(
            basis=basis,
            value=value,
            shape=launch_shape(req),
            w_out=m.w_out,
            w_cached=m.w_cached,
            r_wt_per_s=m.r_wt_per_s,
        )
    )


def _conversion(req: LaunchRequest) -> ConversionShown | None:
    cu = {name: _mean_cu(req, name) for name in SCENARIOS}
    if req.model is None:
        return None
    m = req.model
    how = ConversionShown(model=m.slug, r_wt_per_s=m.r_wt_per_s, w_out=m.w_out)
    shape = launch_shape(req)
    if shape is not None:
        how.prompt_mean, how.output_mean = shape.prompt.mean, shape.output.mean
        how.wt_per_request = shape.wt_per_request(TokenWeights(m.w_out, m.w_cached))
    r = f"{m.r_wt_per_s:,.0f}"
    for name in SCENARIOS:
        basis, value = req.scenario(name)
        if cu.get(name) is None or value is None:
            continue
        if basis == "rps" and how.wt_per_request is not None:
            how.lines[name] = (
                f"{value:,.4g} req/s × {how.wt_per_request:,.1f} wt ÷ {r} = {cu[name]:,.3f} CU at the mean rate"
            )
        elif basis == "wt_per_min":
            how.lines[name] = f"{value:,.0f} wt/min ÷ 60 ÷ {r} = {cu[name]:,.3f} CU at the mean rate"
    return how


def size_request(req: LaunchRequest, regions: list[Region]) -> Sizing:
    """CU per scenario, replicas per pool and headroom over the window, for a saved or unsaved request.

    A scenario's CU is the planning answer for its rate and the request's envelope (planning_answer:
    the least CU on a 0.1 CU step whose replay is throttled on at most the target share), the CU an
    approval grants; the mean-rate conversion is shown beside it (ConversionShown).

    The pool marked `chosen` is the one the approval and `entitlement_grant` pick
    (entitlements.pool_choice.choose_pool: the scope's home pool, else the most headroom after the
    grant), when it has room for the committed CU.
    """
    labels = {"model": "model", "prompt_p50": "prompt tokens p50", "output_p50": "output tokens p50"}
    missing = [label for name, label in labels.items() if getattr(req, name) is None]
    cv = cv_of(req)
    planning = {name: planning_answer(req, scenario_rps(req, name), cv.value) for name in SCENARIOS}
    cu: dict[str, Decimal | None] = {
        name: None if a is None else cu_decimal(a.cu_to_buy) for name, a in planning.items()
    }
    committed_rps = scenario_rps(req, "committed")
    window = window_of(req.launch_date, req.end_date) if req.launch_date else None
    if window is not None and window.end is not None and window.end <= window.start:
        window = None
    counts = req.traffic_class != "best_effort"
    out: list[RegionSizing] = []
    if req.model is not None:
        pools = (
            Pool.objects.filter(model=req.model, region__in=regions)
            .select_related("operating_point__model", "region")
            .prefetch_related("zones")
            .order_by("pk")
        )
        by_region: dict[int, RegionSizing] = {r.pk: RegionSizing(r) for r in regions}
        for pool in pools:
            deliverable = pool.deliverable_cu
            sold = pool_sold_peak(pool, window) if window else Decimal(0)
            per_replica = pool.cu_per_replica
            by_region[pool.region_id].pools.append(
                PoolSizing(
                    pool=pool,
                    cu_per_replica=per_replica,
                    deliverable_cu=deliverable,
                    sold_peak_cu=sold,
                    headroom_cu=deliverable - sold,
                    replicas={k: replicas_for(float(v), per_replica) for k, v in cu.items() if v is not None},
                    fit=committed_fit(pool=pool, rps=committed_rps, req=req) if committed_rps else None,
                )
            )
        committed = cu.get("committed")
        for rs in by_region.values():
            for ps in rs.pools:
                if committed is not None and counts:
                    ps.gap_cu = max(Decimal(0), committed - max(ps.headroom_cu, Decimal(0)))
            choice = (
                choose_pool(
                    [(ps.pool, ps.headroom_cu) for ps in rs.pools],
                    cu=committed,
                    home_pk=_home_pk(req, rs.region),
                    counts_as_sold=counts,
                )
                if committed is not None
                else None
            )
            for ps in rs.pools:
                ps.chosen = choice is not None and choice.fits and ps.pool.pk == choice.pool.pk
            out.append(rs)
    return Sizing(
        cu=cu,
        regions=out,
        window=window,
        counts_as_sold=counts,
        missing=missing,
        how=_conversion(req),
        planning=planning,
        target_throttled_share=target_of(req),
        target_is_default=getattr(req, "target_throttled_share", None) is None,
        traffic_class=req.traffic_class,
        minute_rate_cv=cv.value,
        minute_rate_cv_is_default=cv.is_default,
        minute_rate_cv_source=cv.source,
        minute_rate_cv_origin=cv.origin,
        workload_kind=getattr(req, "workload_kind", "") or "",
        cv_warnings=cv.warnings,
    )


def _home_pk(req: LaunchRequest, region: Region) -> int | None:
    """The pool the request's scope already lives in here (one scope, one pool), if any."""
    if req.tenant_id is None or req.model is None:
        return None
    return scope_pool_id(
        tenant=req.tenant, project=None, model=req.model, region=region, traffic_class=req.traffic_class
    )


def commitments_in(pools: list[Pool], window: Window) -> QuerySet[Entitlement]:
    """Entitlements that hold capacity in these pools during the window (staff eyes only)."""
    qs = Entitlement.objects.filter(pool__in=pools).select_related("tenant", "pool", "traffic_class")
    return overlapping(qs, window.start, window.end).order_by("pool__slug", "starts_at")


def sold_steps(
    pool: Pool, window: Window, horizon: datetime, *, exclude: Collection[int] = ()
) -> list[tuple[datetime, Decimal]]:
    """sold(t) as a step function over [window.start, horizon]: (instant, CU from then on).
    `exclude`: entitlement pks left out (a decided request's own grants, drawn on their own)."""
    end = window.end or horizon
    qs = overlapping(sold_entitlements(pool), window.start, end).exclude(pk__in=list(exclude))
    rows = qs.values_list("starts_at", "ends_at", "cu")
    # The one sweep entitlements.selectors uses for every peak, cut at `end` with sold(end) as the last step.
    swept = sold_steps_in(rows, Window(window.start, None))
    steps = [(t, total) for t, total in swept if t < end]
    steps.append((end, next((total for t, total in reversed(swept) if t <= end), Decimal(0))))
    return steps


def chart_horizon(window: Window) -> datetime:
    """Open-ended windows are drawn for 90 days: far enough to see the next commitments."""
    return window.end or window.start + timedelta(days=90)
