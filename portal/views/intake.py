"""Launch intake pages: requesters file and follow requests, approvers review and decide.

Every view that names a request goes through the services or `launch_request_get`, so another
tenant's member gets a 404 from pages, partials and actions alike.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from entitlements import roles
from entitlements.models import Region
from http_plumbing.form_errors import add_validation_errors
from portal import access
from portal.charts import intake as charts_intake
from portal.forms import CommentForm, LaunchRequestFilter, LaunchRequestForm
from portal.models import LaunchRequest, State
from portal.quotes import quotes_in_words, request_quotes
from portal.selectors import (
    chart_horizon,
    commitments_in,
    events_of,
    launch_requests_visible_to,
    size_request,
    sold_steps,
)
from portal.services import intake
from portal.sizing_fit import RPS, launch_shape, scenario_cu
from portal.views import intake_availability
from portal.views.intake_availability import availability_of, sized_key
from reconciliation.services import launch_request_fields

EDIT = "portal/intake/edit.html"
DETAIL = "portal/intake/detail.html"


def _get(request: HttpRequest, uuid: Any) -> LaunchRequest:
    try:
        return intake.launch_request_get(actor=request.user, request=uuid)
    except intake.LaunchRequestNotFound:
        raise Http404("no such launch request")


def _is_staff(user: Any) -> bool:
    return roles.is_staff_role(user)


# Signed-in people only (portal.access): a gateway account has no business on these pages.
person_required = access.person_required(message="launch requests are for tenant members and approvers")


# --- lists ------------------------------------------------------------------------------------


@require_GET
@person_required
def request_list(request: HttpRequest) -> HttpResponse:
    if _is_staff(request.user) and roles.tenant_of(request.user) is None:
        return redirect("intake-queue")
    rows = launch_requests_visible_to(request.user).select_related("model").prefetch_related("region_rows__region")
    return render(
        request,
        "portal/intake/list.html",
        {"requests": rows, "can_file": roles.REQUESTER in roles.roles_of(request.user)},
    )


@require_GET
@person_required
def queue(request: HttpRequest) -> HttpResponse:
    if not _is_staff(request.user):
        raise PermissionDenied("the review queue is for approvers and operators")
    data = request.GET.copy()
    if "state" not in data:
        data["state"] = State.SUBMITTED  # what waits for a decision, unless asked otherwise
    qs = launch_requests_visible_to(request.user).select_related("tenant", "model", "created_by")
    flt = LaunchRequestFilter(data, queryset=qs.prefetch_related("region_rows__region"))
    template = "portal/intake/queue.html#rows" if request.htmx else "portal/intake/queue.html"  # type: ignore[attr-defined]
    return render(request, template, {"filter": flt, "requests": flt.qs})


def _filer_guard(request: HttpRequest) -> None:
    if roles.REQUESTER not in roles.roles_of(request.user) or roles.tenant_of(request.user) is None:
        raise PermissionDenied("only a tenant's requesters file launch requests")


def _typed_something(changes: dict[str, Any]) -> bool:
    # A blank form posts what a new request already holds (empty text, no choice, unticked boxes):
    # a draft starts only once a field differs from that.
    blank = LaunchRequest()
    return bool(changes.get("regions")) or any(
        getattr(blank, name) != value for name, value in changes.items() if name != "regions"
    )


@require_http_methods(["GET", "POST"])
@person_required
def request_create(request: HttpRequest) -> HttpResponse:
    """GET: the form, unsaved (issue 22: opening it stores nothing). POST: the first autosave (htmx)
    creates the draft and points the page at it; a reconciliation finding's "file a launch request"
    (from_finding) creates one prefilled and redirects to its form."""
    _filer_guard(request)
    if request.method == "GET":
        req = LaunchRequest(tenant=roles.tenant_of(request.user), created_by=request.user)
        # Not initial_from: an unsaved request has no region rows to read.
        initial = {n: getattr(req, n) for n in LaunchRequestForm.base_fields if n not in ("regions", "model")}
        form = LaunchRequestForm(initial=initial)
        return render(request, EDIT, {"req": req, "form": form, "sizing": size_request(req, [])})
    if request.POST.get("from_finding"):  # prefilled from a reconciliation finding's evidence (issue 17.2)
        fields = launch_request_fields(request.user, request.POST["from_finding"])
        if fields is None:
            raise Http404("no such finding")
        req = intake.launch_request_create(actor=request.user, **fields)
        return redirect("intake-edit", uuid=req.uuid)
    form = LaunchRequestForm(request.POST)
    changes = form.valid_changes()
    if not _typed_something(changes):
        ctx = {"req": None, "form": form, "saved": False, "oob": True, "nothing": True}
        return render(request, f"{EDIT}#autosave", ctx, status=200 if request.htmx else 400)  # type: ignore[attr-defined]
    try:
        key = UUID(request.POST.get("draft", ""))
    except ValueError:
        return HttpResponseBadRequest("draft: the new-request page's key is missing; reload the page")
    try:
        req, created = intake.launch_request_create_or_update(actor=request.user, uuid=key, **changes)
    except (intake.LaunchRequestConflict, intake.LaunchRequestNotFound) as exc:
        form.add_error(None, str(exc))
        return render(request, f"{EDIT}#autosave", {"req": None, "form": form, "oob": True}, status=409)
    except ValidationError as exc:
        add_validation_errors(form, exc)
        ctx = {"req": None, "form": form, "saved": False, "oob": True}
        return render(request, f"{EDIT}#autosave", ctx, status=400)
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect("intake-edit", uuid=req.uuid)
    if not created:  # already pointed at the draft
        return render(request, f"{EDIT}#autosave", {"req": req, "form": form, "saved": True, "oob": True})
    # The page stays (the person is typing): its address and its form's URLs switch to the new draft.
    resp = render(request, f"{EDIT}#autosave", {"req": req, "form": form, "saved": True, "oob": True})
    resp["HX-Push-Url"] = reverse("intake-edit", kwargs={"uuid": req.uuid})
    resp["HX-Trigger"] = json.dumps(
        {
            "lr-created": {
                "sizing": reverse("intake-sizing", kwargs={"uuid": req.uuid}),
                "submit": reverse("intake-submit", kwargs={"uuid": req.uuid}),
                "delete": reverse("intake-delete", kwargs={"uuid": req.uuid}),
            }
        }
    )
    return resp


# --- the requester's form ---------------------------------------------------------------------


def _regions_of(req: LaunchRequest) -> list[Region]:
    return [row.region for row in req.region_rows.select_related("region")]


def _sizing_from_form(req: LaunchRequest, form: LaunchRequestForm) -> tuple[Any, str]:
    """Size what is on screen, not what is saved: an unsaved copy with the valid fields applied (and the
    key of what was sized, which the live availability checks before taking the committed CU)."""
    changes = form.valid_changes()
    regions = changes.pop("regions", None)
    preview = copy.copy(req)
    for name, value in changes.items():
        setattr(preview, name, value)
    return size_request(preview, regions if regions is not None else _regions_of(req)), sized_key(preview)


def _save_valid(request: HttpRequest, req: LaunchRequest, form: LaunchRequestForm) -> LaunchRequest:
    return intake.launch_request_update(actor=request.user, request=req.uuid, **form.valid_changes())


def _refuse(request: HttpRequest, req: LaunchRequest, exc: Exception, status: int) -> HttpResponse:
    return render(request, DETAIL, _detail_context(request, req, error=str(exc)), status=status)


def _edit_guard(request: HttpRequest, uuid: Any) -> LaunchRequest:
    req = _get(request, uuid)
    if roles.REQUESTER not in roles.roles_of(request.user) or roles.tenant_of(request.user) != req.tenant:
        raise PermissionDenied("only the tenant's requesters edit its launch requests")
    return req


@require_GET
@person_required
def edit(request: HttpRequest, uuid: Any) -> HttpResponse:
    req = _edit_guard(request, uuid)
    if not req.is_editable:
        return redirect("intake-detail", uuid=req.uuid)
    form = LaunchRequestForm(initial=LaunchRequestForm.initial_from(req))
    sizing = size_request(req, _regions_of(req))
    return render(request, EDIT, {"req": req, "form": form, "sizing": sizing, "sized_for": sized_key(req)})


@require_POST
@person_required
def autosave(request: HttpRequest, uuid: Any) -> HttpResponse:
    """Keeps every field that validated; the bad ones come back as inline errors (out of band)."""
    req = _edit_guard(request, uuid)
    form = LaunchRequestForm(request.POST)
    try:
        req = _save_valid(request, req, form)
        status, saved = 200, True
    except intake.LaunchRequestConflict as exc:
        form.add_error(None, str(exc))
        status, saved = 409, False
    except ValidationError as exc:
        add_validation_errors(form, exc)
        status, saved = 400, False
    return render(request, f"{EDIT}#autosave", {"req": req, "form": form, "saved": saved, "oob": True}, status=status)


@require_POST
@person_required
def sizing(request: HttpRequest, uuid: Any) -> HttpResponse:
    req = _get(request, uuid)
    form = LaunchRequestForm(request.POST)
    result, key = _sizing_from_form(req, form)
    resp = render(request, f"{EDIT}#sizing", {"req": req, "sizing": result, "sized_for": key})
    resp["HX-Trigger-After-Settle"] = "sized"  # the availability re-reads with the CU now on screen
    return resp


@require_POST
@person_required
def availability_rows(request: HttpRequest) -> HttpResponse:
    _filer_guard(request)
    return intake_availability.live_rows(request)


@require_POST
@person_required
def submit(request: HttpRequest, uuid: Any) -> HttpResponse:
    req = _edit_guard(request, uuid)
    form = LaunchRequestForm(request.POST)
    try:
        if request.POST:
            req = _save_valid(request, req, form) if req.is_editable else req
        req = intake.launch_request_submit(actor=request.user, request=req.uuid)
    except intake.LaunchRequestConflict as exc:
        return _refuse(request, req, exc, 409)
    except ValidationError as exc:
        add_validation_errors(form, exc)
        req = _get(request, uuid)
        sizing_result = size_request(req, _regions_of(req))
        return render(request, EDIT, {"req": req, "form": form, "sizing": sizing_result}, status=400)
    return redirect("intake-detail", uuid=req.uuid)


# --- detail, review and decisions -------------------------------------------------------------


def _charts(req: LaunchRequest, result: Any) -> list[dict[str, Any]]:
    if result.window is None:
        return []
    committed = result.cu.get("committed") or Decimal(0)
    horizon = chart_horizon(result.window)
    # Once approved (fully or partly), each pool draws what it granted this request, not the ask.
    decided = req.state in (State.APPROVED, State.PARTIALLY_APPROVED)
    grants = [row.entitlement for row in req.region_rows.select_related("entitlement") if row.entitlement]
    own = {e.pk for e in grants}
    figs = []
    for rs in result.regions:
        for ps in rs.pools:
            granted = sum((e.cu for e in grants if e.pool_id == ps.pool.pk), Decimal(0)) if decided else None
            fig = charts_intake.pool_headroom_figure(
                pool_slug=ps.pool.slug,
                steps=sold_steps(ps.pool, result.window, horizon, exclude=own),
                deliverable_cu=ps.deliverable_cu,
                request_cu=committed,
                request_counts=result.counts_as_sold,
                granted_cu=granted,
            )
            figs.append({"id": f"chart-{ps.pool.slug}", "fig": fig})
    return figs


def _granted_rows(req: LaunchRequest) -> list[Any]:
    """Region rows, each with what was granted in requests/s at the envelope's mix (issue 22): CU ÷ the
    CU one request/s takes (conversion.scenario_cu, the same arithmetic that sized the request)."""
    rows = list(req.region_rows.select_related("region", "entitlement__pool"))
    per_rps = None
    if req.model is not None and launch_shape(req) is not None:
        per_rps = scenario_cu(
            basis=RPS,
            value=1.0,
            shape=launch_shape(req),
            w_out=req.model.w_out,
            w_cached=req.model.w_cached,
            r_wt_per_s=req.model.r_wt_per_s,
        )
    for row in rows:
        # An attribute for the template only (not a column).
        row.approved_rps = float(row.approved_cu) / per_rps if per_rps and row.approved_cu is not None else None  # type: ignore[attr-defined]
    return rows


def _placement_rows(req: LaunchRequest, result: Any) -> list[dict[str, Any]]:
    """Per region: the pools the approver may choose, each with its headroom after the committed
    grant, the default (services.intake.default_pool) and the scope's home pool if it has one."""
    committed = result.cu.get("committed")
    if committed is None or req.launch_date is None or req.model is None:
        return []
    out = []
    for region in _regions_of(req):
        choices, home = intake.pool_choices(req, region, committed, req.launch_date)
        default = intake.default_pool(req, choices, home, committed)
        proposed = req.proposed_pool
        if proposed is not None and proposed.region_id == region.pk:
            default = proposed  # filed against it: the approval grants there unless the approver names another
        out.append({"region": region, "choices": choices, "home": home, "default": default})
    return out


def _quotes(req: LaunchRequest, result: Any) -> dict[str, Any]:
    """docs/contract.md §10: the request's quotes with each term in words (portal.quotes)."""
    return quotes_in_words(request_quotes(req, result))


def _detail_context(request: HttpRequest, req: LaunchRequest, **extra: Any) -> dict[str, Any]:
    r = roles.roles_of(request.user)
    result = size_request(req, _regions_of(req))
    staff = bool(r & roles.STAFF_ROLES)
    pools = [ps.pool for rs in result.regions for ps in rs.pools]
    is_requester = roles.REQUESTER in r and roles.tenant_of(request.user) == req.tenant
    ctx = {
        "req": req,
        "rows": _granted_rows(req),
        "sizing": result,
        "events": events_of(req),
        "staff": staff,
        "is_requester": is_requester,
        "can_decide": roles.APPROVER in r and req.created_by_id != request.user.pk and req.state == State.SUBMITTED,
        "self_filed": roles.APPROVER in r and req.created_by_id == request.user.pk,
        # Other tenants' commitments and the per-pool charts are for platform eyes only.
        "commitments": commitments_in(pools, result.window) if staff and result.window else [],
        "charts": _charts(req, result) if staff else [],
        "comment_form": CommentForm(),
        "quotes": _quotes(req, result),
    }
    if ctx["can_decide"]:
        ctx["placement"] = _placement_rows(req, result)
        # Where the committed CU could go, at the time of review: the requester's rows, read again now.
        ctx["availability"] = availability_of(req, _regions_of(req), result.cu.get("committed"))
    ctx.update(extra)
    return ctx


@require_GET
@person_required
def detail(request: HttpRequest, uuid: Any) -> HttpResponse:
    req = _get(request, uuid)
    return render(request, DETAIL, _detail_context(request, req))


@require_GET
@person_required
def activity(request: HttpRequest, uuid: Any) -> HttpResponse:
    req = _get(request, uuid)
    return render(request, f"{DETAIL}#activity", {"req": req, "events": events_of(req)})


def _decision(
    service: Callable[..., LaunchRequest], kwargs_from: Callable[[HttpRequest], dict[str, Any]]
) -> Callable[..., HttpResponse]:
    @require_POST
    @person_required
    def view(request: HttpRequest, uuid: Any) -> HttpResponse:
        req = _get(request, uuid)  # 404 before anything else
        try:
            service(actor=request.user, request=req.uuid, **kwargs_from(request))
        except intake.LaunchRequestForbidden as exc:
            return _refuse(request, req, exc, 403)
        except intake.LaunchRequestConflict as exc:
            return _refuse(request, _get(request, uuid), exc, 409)
        except ValidationError as exc:
            errors = [f"{k.replace('_', ' ')}: {'; '.join(v)}" for k, v in exc.message_dict.items()]
            return render(request, DETAIL, _detail_context(request, req, errors=errors), status=400)
        return redirect("intake-detail", uuid=req.uuid)

    view.__name__ = service.__name__
    return view


@require_POST
@person_required
def delete(request: HttpRequest, uuid: Any) -> HttpResponse:
    req = _get(request, uuid)  # 404 before anything else
    try:
        intake.launch_request_delete(actor=request.user, request=req.uuid)
    except intake.LaunchRequestForbidden as exc:
        return _refuse(request, req, exc, 403)
    except intake.LaunchRequestConflict as exc:
        return _refuse(request, req, exc, 409)
    return redirect("intake-list")


def _comment(request: HttpRequest) -> dict[str, Any]:
    return {"comment": request.POST.get("comment", "")}


def _placement(request: HttpRequest) -> dict[str, Any]:
    """The approver's start date and pool per region (pool_<region>; blank = the default)."""
    pools = {k.removeprefix("pool_"): v for k, v in request.POST.items() if k.startswith("pool_")}
    return {"start_date": request.POST.get("start_date", ""), "pools": pools}


def _term(request: HttpRequest) -> dict[str, Any]:
    """The commitment term the approver chose from the quotes (blank: on demand)."""
    return {"term": request.POST.get("term", "") or "on_demand"}


def _approve(request: HttpRequest) -> dict[str, Any]:
    return {**_comment(request), **_placement(request), **_term(request)}


def _partial(request: HttpRequest) -> dict[str, Any]:
    region_cu = {k.removeprefix("cu_"): v for k, v in request.POST.items() if k.startswith("cu_")}
    return {"region_cu": region_cu, "comment": request.POST.get("comment", ""), **_placement(request), **_term(request)}


approve = _decision(intake.launch_request_approve, _approve)
partially_approve = _decision(intake.launch_request_partially_approve, _partial)
reject = _decision(intake.launch_request_reject, _comment)
return_ = _decision(intake.launch_request_return, _comment)
withdraw = _decision(intake.launch_request_withdraw, _comment)
