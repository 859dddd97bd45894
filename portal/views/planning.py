"""Planning pages: the operator/approver view of forecasts, gaps and cost, and each tenant's own.

Tenant members only ever reach their own series (forecasting.selectors.series_visible_to);
the staff page is refused to them outright.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from entitlements import roles
from forecasting import cost_report, gap, selectors, services
from portal.charts import planning as charts_planning

PAGE = "portal/planning/index.html"


def _staff(request: HttpRequest) -> None:
    if not roles.is_staff_role(request.user):
        raise PermissionDenied("planning is for operators and approvers")


def _status_context(request: HttpRequest) -> dict[str, Any]:
    return {"run": selectors.current_run(), "can_run": roles.OPERATOR in roles.roles_of(request.user)}


@require_GET
@login_required
def planning(request: HttpRequest) -> HttpResponse:
    if not roles.is_staff_role(request.user) and roles.tenant_of(request.user) is not None:
        return redirect("planning-mine")
    _staff(request)
    run, pools = gap.supply_gap()
    series = [selectors.series_summary(s) for s in selectors.series_visible_to(request.user, run)]
    return render(
        request,
        PAGE,
        {
            **_status_context(request),
            "finished": run,
            "pools": [{**p, "fig": charts_planning.pool_fan(p), "fig_id": f"fan-{p['pool']}"} for p in pools],
            "series": series,
            "costs": cost_report.pool_cost_report(days=7),
        },
    )


@require_GET
@login_required
def run_status(request: HttpRequest) -> HttpResponse:
    _staff(request)
    return render(request, f"{PAGE}#run-status", _status_context(request))


@require_POST
@login_required
def run_now(request: HttpRequest) -> HttpResponse:
    if roles.OPERATOR not in roles.roles_of(request.user):
        raise PermissionDenied("only operators start forecast runs")
    services.forecast_run_request(requested_by=request.user)
    if request.htmx:
        return render(request, f"{PAGE}#run-status", _status_context(request))
    return redirect("planning")


@require_GET
@login_required
def mine(request: HttpRequest) -> HttpResponse:
    tenant = roles.tenant_of(request.user)
    if tenant is None:
        raise PermissionDenied("this page shows a tenant's own forecast")
    rows = []
    for i, s in enumerate(selectors.series_visible_to(request.user)):
        summary = selectors.series_summary(s)
        rows.append({**summary, "fig": charts_planning.series_fan(summary), "fig_id": f"series-{i}"})
    return render(
        request, "portal/planning/mine.html", {"tenant": tenant, "series": rows, "run": selectors.latest_run()}
    )
