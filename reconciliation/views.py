"""Reconciliation pages (issue 17.2), mounted at /reconciliation/ by config/urls.py: the queue for
operators and approvers (tenant members see their own findings; another tenant's is a 404), a finding
with its evidence, accept / dismiss, and the entitlement amendment prefilled from the evidence."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from capacity.envelope import ENVELOPE_LENGTHS
from entitlements import roles
from entitlements.models import Entitlement
from entitlements.services import entitlement_amend
from http_plumbing.form_errors import add_validation_errors
from reconciliation import services
from reconciliation.models import Finding, ForecastAccuracy, PoolReview, ReconciliationRun

ENVELOPE: tuple[str, ...] = (*ENVELOPE_LENGTHS, "max_concurrency")


def _finding(request: HttpRequest, finding: Any) -> Finding:
    f = services.visible_findings(request.user).filter(pk=finding).first()
    if f is None:
        raise Http404("no such finding")
    return f


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state") or "open"
    if state not in Finding.State.values:
        state = "open"
    findings = services.visible_findings(request.user).filter(state=state).order_by("kind", "-created_at")
    staff = roles.is_staff_role(request.user)
    if not staff and not findings.exists() and not roles.tenant_of(request.user):
        raise Http404
    ctx = {
        "findings": findings,
        "state": state,
        "states": Finding.State.choices,
        "may_act": services.may_act(request.user),
        "last_run": ReconciliationRun.objects.first() if staff else None,
        "reviews": PoolReview.objects.filter(closed_at__isnull=True).select_related("pool", "finding") if staff else [],
        "accuracy": ForecastAccuracy.objects.all()[:50] if staff else [],
    }
    return render(request, "reconciliation/queue.html", ctx)


@login_required
@require_POST
def run_now(request: HttpRequest) -> HttpResponse:
    if not services.may_act(request.user):
        return HttpResponseForbidden("operators and approvers run reconciliation")
    services.run_request(requested_by=request.user)
    return redirect("reconciliation-queue")


@login_required
def detail(request: HttpRequest, finding: Any) -> HttpResponse:
    f = _finding(request, finding)
    ctx = {"f": f, "may_act": services.may_act(request.user), "acts": f.acts.select_related("actor"),
           "may_amend": roles.has_any(request.user, roles.OPERATOR), "error": request.GET.get("error"),
           "may_file": roles.has_any(request.user, roles.REQUESTER)}  # fmt: skip
    return render(request, "reconciliation/finding.html", ctx)


@login_required
@require_POST
def act(request: HttpRequest, finding: Any, verb: str) -> HttpResponse:
    f = _finding(request, finding)
    if not services.may_act(request.user):
        return HttpResponseForbidden("operators and approvers act on findings")
    do = services.finding_accept if verb == "accept" else services.finding_dismiss
    try:
        do(actor=request.user, finding=f, reason=request.POST.get("reason", ""))
    except services.FindingError as e:
        ctx = {"f": f, "may_act": True, "acts": f.acts.all(), "error": f"{e.field}: {e.message}"}
        return render(request, "reconciliation/finding.html", ctx, status=400)
    return redirect("reconciliation-finding", finding=f.pk)


class AmendForm(forms.Form):
    cu = forms.DecimalField(label="CU", min_value=Decimal("0.001"), max_digits=12, decimal_places=3)
    reason = forms.CharField(max_length=500)


def _amend_form(f: Finding, ent: Entitlement, data: Any = None) -> AmendForm:
    form = AmendForm(data, initial=_initial(f, ent))
    if f.kind == Finding.Kind.ENVELOPE_DRIFT:
        for name in ENVELOPE:
            form.fields[name] = forms.IntegerField(min_value=1, label=name.replace("_", " "))
    return form


def _initial(f: Finding, ent: Entitlement) -> dict[str, Any]:
    rec = f.recommended or {}
    out: dict[str, Any] = {
        "cu": Decimal(str(rec["cu"])) if rec.get("cu") is not None else ent.cu,
        "reason": f"Reconciliation: {f.get_kind_display().lower()} (finding {f.pk})",
    }
    for name in ENVELOPE:
        out[name] = (rec.get("envelope") or {}).get(name, getattr(ent, name))
    return out


@login_required
def amend(request: HttpRequest, finding: Any) -> HttpResponse:
    """The entitlement amendment, prefilled with the finding's CU (and envelope for a drift). Saving it
    amends the entitlement and accepts the finding; no committed adjustment is written, since the
    amendment itself changes what is committed."""
    f = _finding(request, finding)
    if not roles.has_any(request.user, roles.OPERATOR):
        raise Http404  # only operators write entitlements (docs/contract.md §7)
    ent = Entitlement.objects.select_related("tenant", "model", "region", "pool").get(pk=f.entitlement_id)
    form = _amend_form(f, ent, request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if f.state != Finding.State.OPEN:
            form.add_error(None, f"this finding is already {f.state}")
        elif form.is_valid():
            changes = {k: v for k, v in form.cleaned_data.items() if k != "reason"}
            try:
                with transaction.atomic():
                    entitlement_amend(
                        actor=request.user, reason=form.cleaned_data["reason"], entitlement=ent, **changes
                    )
                    services.finding_accept(actor=request.user, finding=f, reason=form.cleaned_data["reason"],
                                            adjust=False)  # fmt: skip
            except ValidationError as e:
                add_validation_errors(form, e)
            else:
                return redirect("reconciliation-finding", finding=f.pk)
        status = 400
    return render(request, "reconciliation/amend.html", {"f": f, "ent": ent, "form": form}, status=status)
