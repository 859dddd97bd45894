"""Planning pages: the operator/approver view of forecasts, gaps and cost, and each tenant's own.

The main page answers "what needs action" first (pools short in some scenario and case, late ones
first); each pool's scenarios, chart, orders and cost live on its own page.

Tenant members only ever reach their own series (forecasting.selectors.series_visible_to);
the staff pages are refused to them outright.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from admission import lending
from capacity.input_errors import SizingInputError
from entitlements import roles
from entitlements.models import Pool
from entitlements.prices import prices_read_once
from forecasting import cost_report, gap, selectors, services
from forecasting.models import ForecastRun, SupplyOrder
from portal.charts import planning as charts_planning
from portal.planning_actions import action_rows

PAGE = "portal/planning/index.html"
POOL_PAGE = "portal/planning/pool.html"
STATUS = "portal/planning/_run_status.html"


def _staff(request: HttpRequest) -> None:
    if not roles.is_staff_role(request.user):
        raise PermissionDenied("planning is for operators and approvers")


def run_step(run: ForecastRun | None) -> str:
    """The run's step in words, from its status and checkpointed progress (forecast_run_execute
    checkpoints after every batch of series and writes the results once, at the end)."""
    if run is None:
        return ""
    if run.status == ForecastRun.Status.QUEUED:
        return "waiting for a worker to pick it up"
    if run.status == ForecastRun.Status.FAILED:
        return "failed"
    if run.status == ForecastRun.Status.SUCCEEDED:
        return "done"
    done, total = getattr(run, "chunks_done", None), getattr(run, "chunks_total", None)
    if total:
        return f"forecasting series: chunk {done or 0} of {total}"
    if run.progress == 0:
        return "reading demand history"
    if run.progress >= 99:
        return "writing results"
    return "forecasting series batch by batch"


def _status_context(request: HttpRequest) -> dict[str, Any]:
    run = selectors.current_run()
    stale = None
    if run is not None and run.status == ForecastRun.Status.RUNNING and run.heartbeat_at is not None:
        stale = timezone.now() - run.heartbeat_at > services.stale_after()
    return {
        "run": run,
        "step": run_step(run),
        "stale": stale,
        "can_run": roles.OPERATOR in roles.roles_of(request.user),
    }


def _pool_summary(p: dict[str, Any]) -> dict[str, Any]:
    shorts = [g for cases in p["gaps"].values() for g in cases.values() if g.get("first_week") is not None]
    return {
        "pool": p["pool"],
        "accelerator": p["accelerator"],
        "short": bool(shorts),
        "late": any(g["late"] for g in shorts),
        "max_gap_cu": max((g["max_gap_cu"] for g in shorts), default=0.0),
    }


def _explained(s: Any, i: int) -> dict[str, Any]:
    """A series' summary with its backtest chart (forecast made N weeks ago vs what happened)."""
    summary = selectors.series_summary(s)
    return {**summary, "fig_id": f"series-{i}", "backtest_fig": charts_planning.series_backtest(summary)}


@require_GET
@login_required
def planning(request: HttpRequest) -> HttpResponse:
    if not roles.is_staff_role(request.user) and roles.tenant_of(request.user) is not None:
        return redirect("planning-mine")
    _staff(request)
    run, pools = gap.supply_gap()
    series = [_explained(s, i) for i, s in enumerate(selectors.series_visible_to(request.user, run))]
    return render(
        request,
        PAGE,
        {
            **_status_context(request),
            "finished": run,
            "today": timezone.now().date(),
            "actions": action_rows(pools),
            "pools": [_pool_summary(p) for p in pools],
            "series": series,
        },
    )


@require_GET
@login_required
@prices_read_once()  # one read of the price list for the gap's and the cost report's rates of every pool
def pool(request: HttpRequest, slug: str) -> HttpResponse:
    _staff(request)
    try:
        pool_obj = Pool.objects.select_related("model", "region", "accelerator").get(slug=slug)
    except Pool.DoesNotExist:
        raise Http404("no such pool")
    run, pools = gap.supply_gap()
    row = next((p for p in pools if p["pool"] == slug), None)
    # The cost report covers every pool; this page shows its own row (a week of hours, not a forecast).
    try:
        cost = next((c for c in cost_report.pool_cost_report(days=7) if c["pool"] == slug), None)
        cost_error = ""
    except SizingInputError as exc:  # an accelerator the catalogue cannot price: say so, show the rest
        cost, cost_error = None, f"{exc.field}: {exc.message}"
    ctx: dict[str, Any] = {
        "pool": pool_obj,
        "finished": run,
        "row": row,
        "actions": action_rows([row]) if row else [],
        "orders": SupplyOrder.objects.filter(pool=pool_obj).order_by("arrival_date"),
        "cost": cost,
        "cost_error": cost_error,
        "cost_window_days": 7,
        "lending": lending.pool_lending(pool_obj.pk),  # issue 36.3: lenders' limits, borrowers' weights
    }
    if row is not None:
        ctx["fig"] = charts_planning.pool_fan(row)
        ctx["horizon_end"] = row["weeks"][-1]["start"] + timedelta(weeks=1) if row["weeks"] else None
    return render(request, POOL_PAGE, ctx)


@require_GET
@login_required
def run_status(request: HttpRequest) -> HttpResponse:
    _staff(request)
    return render(request, STATUS, _status_context(request))


@require_POST
@login_required
def run_now(request: HttpRequest) -> HttpResponse:
    if roles.OPERATOR not in roles.roles_of(request.user):
        raise PermissionDenied("only operators start forecast runs")
    services.forecast_run_request(requested_by=request.user)
    if request.htmx:  # type: ignore[attr-defined]  # set by django-htmx's middleware
        return render(request, STATUS, _status_context(request))
    return redirect("planning")


@require_GET
@login_required
def mine(request: HttpRequest) -> HttpResponse:
    tenant = roles.tenant_of(request.user)
    if tenant is None:
        raise PermissionDenied("this page shows a tenant's own forecast")
    rows = []
    for i, s in enumerate(selectors.series_visible_to(request.user)):
        summary = _explained(s, i)
        rows.append({**summary, "fig": charts_planning.series_fan(summary)})
    return render(
        request, "portal/planning/mine.html", {"tenant": tenant, "series": rows, "run": selectors.latest_run()}
    )
