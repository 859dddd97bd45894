"""Live pages: operator fleet, one entitlement, customer usage (+ CSV). (/metrics: telemetry/metrics_view.py.)

Every page has one `{% partialdef panels %}` that htmx polls; an htmx request gets that partial alone.
Anyone who may not see a page gets 404, never 403, so a page's existence does not leak either.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from entitlements import roles
from entitlements.concurrency import max_concurrency_derivation
from entitlements.models import Tenant
from entitlements.reasons import REASONS
from entitlements.selectors import entitlement_history, entitlements_visible_to, pools_with_totals
from portal.charts import live as charts_live
from portal.csv_echo import csv_echo_writer
from portal.usage_meters import usage_of
from portal.usage_range import default_range
from telemetry.deadletter import quarantined_by_stage
from telemetry.selectors import entitlement_series, fleet_series, latest_samples, usage_series

RANGES: dict[str, timedelta] = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
}
SOURCE_COLUMNS = ("admitted_borrowed", "admitted_spilled", "borrowed_wt", "spilled_wt")
POLL_UP_TO = timedelta(hours=24)  # coarser ranges read hour/day rollups that barely move in 5 s


def _range(request: HttpRequest, default: str) -> tuple[str, Any, Any]:
    key = request.GET.get("range", default)
    if key not in RANGES:
        key = default
    end = timezone.now()
    return key, end - RANGES[key], end


def _data_range(request: HttpRequest, scope: Q) -> tuple[str, Any, Any, str]:
    """Like _range, but a page opened without ?range= shows the shortest range with data."""
    if request.GET.get("range") in RANGES:
        key, start, end = _range(request, "24h")
        return key, start, end, f"showing the last {key}"
    end = timezone.now()
    key, why = default_range(scope, RANGES, end)
    return key, end - RANGES[key], end, why


def _page(request: HttpRequest, template: str, ctx: dict[str, Any]) -> HttpResponse:
    ctx.setdefault("ranges", list(RANGES))
    if getattr(request, "htmx", False):
        return render(request, f"{template}#panels", ctx)
    return render(request, template, ctx)


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    if not roles.is_staff_role(request.user):
        raise Http404
    key, start, end = _range(request, "1h")
    usage = usage_series(request.user, None, None, None, start, end, latency=False)
    series = fleet_series(start, end)
    latest = latest_samples()
    pools = []
    per_pool: dict[str, list[dict[str, Any]]] = {}
    for p in pools_with_totals(end):
        pool = p["pool"]
        s = latest.get(pool.pk, {})
        per_pool[pool.slug] = [
            {
                "t": r["t"].isoformat(),
                "util": r["util"],
                "kv": r["kv"],
                "healthy": r["healthy"],
                "total": r.get("total"),
            }
            for r in series.get(pool.pk, [])
        ]
        pools.append(
            {
                "slug": pool.slug,
                "model": pool.model.slug,
                "region": pool.region.slug,
                "util": s.get("accelerator_util"),
                "kv": s.get("kv_cache_usage"),
                "healthy": s.get("replicas_healthy"),
                "total": s.get("replicas_total"),
                "waiting": s.get("requests_waiting"),
                "sampled_at": s.get("ts"),
                "deliverable_cu": p["deliverable_cu"],
                "sold_cu": p["sold_cu"],
                "headroom_cu": p["headroom_cu"],
            }
        )
    tenant_fig, platform_fig = charts_live.throttle_split(usage)
    ctx = {
        "range": key,
        "poll": RANGES[key] <= POLL_UP_TO,
        "pools": pools,
        "fleet_figs": [{"id": f"fleet-{k}", "fig": fig} for k, fig in charts_live.fleet_figures(per_pool).items()],
        "totals": charts_live.totals(usage),
        "level": usage["level"],
        "decisions_fig": charts_live.decisions_figure(usage),
        "sources": charts_live.by_source(usage),
        "sources_fig": charts_live.sources_figure(usage, "tenants'"),
        "tenant_fig": tenant_fig,
        "platform_fig": platform_fig,
        "quarantined": (quarantined := quarantined_by_stage()),
        "quarantined_total": sum(quarantined.values()),
    }
    return _page(request, "portal/live/fleet.html", ctx)


@login_required
def entitlement(request: HttpRequest, uuid: Any) -> HttpResponse:
    r = roles.roles_of(request.user)
    if not (r & roles.STAFF_ROLES or r & {roles.VIEWER, roles.REQUESTER}):
        raise Http404  # gateways see every entitlement through the API, but this page is for people
    ent = entitlements_visible_to(request.user).filter(uuid=uuid).first()
    if ent is None:
        raise Http404
    key, start, end, range_note = _data_range(request, Q(entitlement=str(ent.uuid)))
    usage = entitlement_series(ent, start, end, latency=False)
    tenant_fig, platform_fig = charts_live.throttle_split(usage)
    over = ent.revoked_at or ent.ends_at
    ctx = {
        "ent": ent,
        "rate": ent.rate_wt_per_s,
        "range": key,
        "range_note": range_note,
        # stop polling once the entitlement is over and the range is not the live edge any more
        "poll": RANGES[key] <= POLL_UP_TO and (over is None or over > start),
        "level": usage["level"],
        "totals": charts_live.totals(usage),
        "rate_fig": charts_live.rate_figure(usage),
        "tokens_fig": charts_live.tokens_figure(usage),
        "sources": charts_live.by_source(usage),
        "sources_fig": charts_live.sources_figure(usage),
        "tenant_fig": tenant_fig,
        "platform_fig": platform_fig,
    }
    if not getattr(request, "htmx", False):  # the polled panels do not show it: derive once per page
        ctx["cap"] = max_concurrency_derivation(ent)
        ctx["history"] = entitlement_history(ent)
        ctx["usage"] = usage_of(ent, timezone.now())
    return _page(request, "portal/live/entitlement.html", ctx)


def _usage_scope(request: HttpRequest) -> tuple[Tenant | None, str | None]:
    """A member sees their own tenant whatever they ask for in `?tenant=`… except another tenant: 404."""
    r = roles.roles_of(request.user)
    wanted = request.GET.get("tenant") or None
    if r & roles.STAFF_ROLES:
        if wanted is None:
            return None, None
        tenant = Tenant.objects.filter(slug=wanted).first()
        if tenant is None:
            raise Http404
        return tenant, tenant.slug
    own = roles.tenant_of(request.user)
    if own is None or (wanted and wanted != own.slug):
        raise Http404
    return own, own.slug


@login_required
def usage(request: HttpRequest) -> HttpResponse:
    tenant, slug = _usage_scope(request)
    model = request.GET.get("model") or None
    region = request.GET.get("region") or None
    scope = Q(**{k: v for k, v in (("tenant", slug), ("model", model), ("region", region)) if v})
    key, start, end, range_note = _data_range(request, scope)
    try:
        data = usage_series(request.user, slug, model, region, start, end, latency=False)
    except Tenant.DoesNotExist:
        raise Http404
    tenant_fig, platform_fig = charts_live.throttle_split(data)
    ctx = {
        "tenant": tenant,
        "range": key,
        "range_note": range_note,
        "query": request.GET.urlencode(),
        "poll": RANGES[key] <= POLL_UP_TO,
        "level": data["level"],
        "totals": charts_live.totals(data),
        "rate_fig": charts_live.rate_figure(data),
        "tokens_fig": charts_live.tokens_figure(data),
        "sources": charts_live.by_source(data),
        "sources_fig": charts_live.sources_figure(data),
        "tenant_fig": tenant_fig,
        "platform_fig": platform_fig,
        "tenant_slug": slug or "",
    }
    return _page(request, "portal/live/usage.html", ctx)


@login_required
def usage_export(request: HttpRequest) -> StreamingHttpResponse:
    """The same series as /usage/, one row per time step; throttles split by who caused them."""
    _, slug = _usage_scope(request)
    key, start, end = _range(request, "6h")
    try:
        data = usage_series(
            request.user,
            slug,
            request.GET.get("model") or None,
            request.GET.get("region") or None,
            start,
            end,
            latency=False,
        )
    except Tenant.DoesNotExist:
        raise Http404
    s = data["series"]
    reasons = list(REASONS)
    header = [
        "t",
        "entitled_wt_per_s",
        "arrived_requests",
        "arrived_wt_per_s",
        "admitted_requests",
        "admitted_wt_per_s",
        "throttled_tenant_caused",
        "throttled_platform_caused",
        *[f"throttled_{r}" for r in reasons],
        "estimated_wt",
        "actual_wt",
        # issue 36: admitted beyond the own capacity, and the wt such requests settled
        *SOURCE_COLUMNS,
    ]

    def rows() -> Any:
        w = csv_echo_writer()
        yield w.writerow(header)
        zero = [0] * len(data["t"])
        by = {r: s["throttled_requests"].get(r, zero) for r in reasons}
        for i, t in enumerate(data["t"]):
            mine = sum(by[r][i] for r in reasons if charts_live.is_tenant_caused(r))
            ours = sum(by[r][i] for r in reasons if not charts_live.is_tenant_caused(r))
            yield w.writerow(
                [
                    t,
                    s["entitled_wt_per_s"][i],
                    int(s["arrived_requests"][i]),
                    s["arrived_wt_per_s"][i],
                    int(s["admitted_requests"][i]),
                    s["admitted_wt_per_s"][i],
                    int(mine),
                    int(ours),
                    *[int(by[r][i]) for r in reasons],
                    s["estimated_wt"][i],
                    s["actual_wt"][i],
                    *[s[c][i] for c in SOURCE_COLUMNS],
                ]
            )

    resp = StreamingHttpResponse(rows(), content_type="text/csv")
    name = f"usage-{slug or 'all'}-{key}.csv"
    resp["Content-Disposition"] = f'attachment; filename="{name}"'
    return resp
