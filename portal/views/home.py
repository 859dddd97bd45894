"""`/`: operators and approvers see every pool's capacity; tenant members see their entitlements.

Numbers are formatted here (thousands separators, 1 decimal for CU) so the templates stay plain.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django_htmx.middleware import HtmxDetails

from capacity.deliverable import deliverable_under_failure
from capacity.failure import parse_failure_policy
from entitlements import roles
from entitlements.models import Entitlement
from entitlements.models.supply import as_cu
from entitlements.selectors import entitlements_visible_to, failover_reserves, pools_with_totals
from portal.charts.home import SEGMENT_COLOURS, PoolBar, capacity_breakdown_figure, pool_segments
from portal.numbers import plain
from portal.usage_meters import model_totals, tenant_usages, usages_of

GOODPUT_IN_WORDS = (
    "CU per replica = output tokens/s at the latency SLO × (w_out + mean prompt ÷ mean output of the reference mix) ÷ R"
)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class LoginView(auth_views.LoginView):
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # The demo logins are listed only on a development server.
        return super().get_context_data(**kwargs) | {"show_demo_logins": settings.DEBUG}


def cu(value: Decimal | float) -> str:
    return plain(value, "cu")


def num(value: float | int) -> str:
    return plain(value)


@login_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    if roles.is_staff_role(request.user):
        return operator_home(request)
    if roles.tenant_of(request.user) is not None:
        return tenant_home(request)
    # Gateway tokens and people without a role have no pages.
    raise PermissionDenied("no page for this role")


def _reserve_notes() -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Per pool: reserves it holds; reserves protecting it."""
    held: dict[int, list[str]] = defaultdict(list)
    for_pool: dict[int, list[str]] = defaultdict(list)
    for r in failover_reserves():
        held[r.host_pool_id].append(f"{cu(r.cu)} CU for {r.scope}" + (f" — {r.note}" if r.note else ""))
        # Every reserve names the one pool it stands for (a zone reserve: its replicas in that zone),
        # so it is listed once, under that pool.
        where = f"zone {r.protected_zone.slug}: " if r.protected_zone is not None else ""
        for_pool[r.protected_pool_id].append(f"{where}{cu(r.cu)} CU held in {r.host_pool.slug}")
    return held, for_pool


def operator_context(at: datetime | None = None) -> dict[str, Any]:
    held, for_pool = _reserve_notes()
    rows, bars = [], []
    for t in pools_with_totals(at):
        p, b = t["pool"], t["breakdown"]
        op = p.operating_point
        zones = list(p.zones.all())
        deliverable, sold = t["deliverable_cu"], t["sold_cu"]
        # What the pool still delivers after its own failure policy, at the CU precision approvals use.
        failure = as_cu(deliverable_under_failure(p.supply(), parse_failure_policy(p.failure_policy)).deliverable)
        util = float(sold / deliverable * 100) if deliverable else 0.0
        segments = pool_segments(
            physical=t["physical_cu"],
            deliverable=deliverable,
            sold=sold,
            reserve=b.failover_reserve,
            maintenance=b.maintenance,
            safety=b.safety,
            fragmentation=b.fragmentation,
        )
        bars.append(PoolBar(p.slug, t["physical_cu"], segments))
        rows.append(
            {
                "slug": p.slug,
                "model": p.model.slug,
                "region": p.region.slug,
                "accelerator": f"{p.accelerator.slug} ×{p.accelerators_per_replica}",
                # Zone slugs repeat the region: show the suffix, keep the full slug in the tooltip.
                "zones": [(z.zone.slug, z.zone.slug.removeprefix(f"{p.region.slug}-"), z.replicas) for z in zones],
                "replicas": sum(z.replicas for z in zones),
                "cu_per_replica": cu(p.cu_per_replica),
                "goodput_explained": op.goodput_explained,
                "ref_mix_source": op.ref_mix_source,
                "op_label": f"{op.scenario}, {op.runtime}",
                "op_source": op.source,
                "is_ceiling": op.is_ceiling,
                "physical": cu(t["physical_cu"]),
                "deliverable": cu(deliverable),
                "sold": cu(sold),
                "headroom": cu(t["headroom_cu"]),
                "oversold": t["headroom_cu"] < 0,
                "failure_policy": p.failure_policy,
                "failure_deliverable": cu(failure),
                "failure_fits": sold <= failure,
                "failure_short": cu(sold - failure) if sold > failure else "",
                "util_pct": f"{util:.0f}",
                "util_width": f"{min(util, 100.0):.1f}",
                "util_level": "hot" if util >= 90 else "warm" if util >= 70 else "ok",
                "segments": [(s.name, cu(s.cu)) for s in segments],
                "reserves_held": held.get(p.pk, []),
                "protected_by": for_pool.get(p.pk, []),
            }
        )
    figure = capacity_breakdown_figure(bars)
    drawn = {trace["name"] for trace in figure["data"]}
    return {
        "rows": rows,
        "figure": figure,
        "legend": [(name, colour) for name, colour in SEGMENT_COLOURS.items() if name in drawn],
        "goodput_in_words": GOODPUT_IN_WORDS,
    }


def operator_home(request: HtmxHttpRequest) -> HttpResponse:
    template = "portal/home/operator.html"
    if request.htmx:
        template += "#pools"
    return render(request, template, operator_context())


def _status(e: Entitlement, now: datetime) -> str:
    if e.revoked_at is not None:
        return "revoked"
    if e.starts_at > now:
        return "upcoming"
    if e.ends_at is not None and e.ends_at <= now:
        return "ended"
    return "active"


def entitlement_rows(user: Any, now: datetime | None = None, *, with_usage: bool = False) -> list[dict[str, Any]]:
    now = now or timezone.now()
    out = []
    ents = list(entitlements_visible_to(user).order_by("model__slug", "region__slug", "starts_at", "pk"))
    tenant = roles.tenant_of(user)
    if not with_usage:
        usages = {}
    elif tenant is not None:  # a tenant's people share its meters for a moment (portal.usage_meters)
        usages = tenant_usages(tenant.pk, ents, now)
    else:
        usages = usages_of(ents, now)
    for e in ents:
        out.append(
            {
                "ent": e,
                "usage": usages.get(e.pk),
                "uuid": e.uuid,
                "model": e.model.slug,
                "region": e.region.slug,
                "project": e.project.slug if e.project else "",
                "traffic_class": e.traffic_class_id,
                "status": _status(e, now),
                "starts": e.starts_at.strftime("%Y-%m-%d"),
                "ends": e.ends_at.strftime("%Y-%m-%d") if e.ends_at else "open-ended",
                "cu": cu(e.cu),
                "wt_per_s": num(e.rate_wt_per_s),
                "r": num(e.model.r_wt_per_s),
                "prompt": f"≤ {num(e.max_prompt_tokens)} (p50 {num(e.prompt_p50)}, p95 {num(e.prompt_p95)})",
                "output": f"≤ {num(e.max_output_tokens)} (p50 {num(e.output_p50)}, p95 {num(e.output_p95)})",
                "concurrency": num(e.max_concurrency),
                "latency": f"TTFT p99 {num(e.ttft_p99_ms)} ms · TPOT p99 {num(e.tpot_p99_ms)} ms",
                "streaming": e.streaming,
                "overage": e.get_overage_display(),
                "borrowing_limit": cu(e.borrowing_limit_cu),
                "version": e.version,
            }
        )
    return out


def tenant_home(request: HtmxHttpRequest) -> HttpResponse:
    template = "portal/home/tenant.html"
    if request.htmx:
        template += "#entitlements"
    rows = entitlement_rows(request.user, with_usage=True)
    context = {
        "tenant": roles.tenant_of(request.user),
        "rows": rows,
        "totals": model_totals([(r["ent"], r["usage"]) for r in rows]),
    }
    return render(request, template, context)
