"""Alert pages: the inbox, rules, webhook endpoints with their delivery log and a test-fire button.

Anyone who may not see a page or an object gets 404 (never 403), so existence does not leak; a
person who sees an object but may not change it gets 403. htmx requests get the page's partial.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from alerts import selectors, services
from alerts.conditions import THRESHOLDS
from alerts.forms import AlertRuleForm, WebhookEndpointForm
from alerts.models import AlertRule, Notification
from entitlements import roles


def _person(request: HttpRequest) -> Any:
    user = request.user
    if roles.roles_of(user) == frozenset({roles.GATEWAY}):
        raise Http404  # gateway accounts reach the serving path only
    return user


def _page(request: HttpRequest, template: str, ctx: dict[str, Any], status: int = 200) -> HttpResponse:
    if getattr(request, "htmx", False):
        return render(request, f"{template}#main", ctx, status=status)
    return render(request, template, ctx, status=status)


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    user = _person(request)
    notes = selectors.inbox_of(user)
    ctx: dict[str, Any] = {"notes": notes, "unread": sum(1 for n in notes if n.read_at is None)}
    if not notes:  # why it is empty: no rule speaks to this person, or none has held yet
        ctx["watching"] = _rules_telling(user).count()
    return _page(request, "alerts/inbox.html", ctx)


def _rules_telling(user: Any) -> Any:
    """Enabled rules whose alerts reach this person (alerts.recipients): the tenant's own rules for
    its members, pool and platform rules for approvers and operators."""
    rules = selectors.rules_visible_to(user).filter(enabled=True)
    if roles.roles_of(user) & roles.STAFF_ROLES:
        return rules.exclude(scope=AlertRule.Scope.TENANT)
    return rules.filter(scope=AlertRule.Scope.TENANT)


@require_POST
@login_required
def mark_read(request: HttpRequest, note: str) -> HttpResponse:
    user = _person(request)
    n = Notification.objects.filter(uuid=note, user=user).first()
    if n is None:
        raise Http404
    services.notification_mark_read(user=user, notification=n)
    return redirect("alerts-inbox")


@require_POST
@login_required
def mark_all_read(request: HttpRequest) -> HttpResponse:
    services.notifications_mark_all_read(user=_person(request))
    return redirect("alerts-inbox")


@require_http_methods(["GET", "POST"])
@login_required
def rules(request: HttpRequest) -> HttpResponse:
    user = _person(request)
    form = AlertRuleForm(request.POST or None, user=user)
    status = 200
    if request.method == "POST":
        if not selectors.may_manage(user, roles.tenant_of(user)):
            return HttpResponseForbidden("you may not add alert rules")
        if form.is_valid():
            data = form.cleaned_data
            services.alert_rule_create(
                actor=user,
                name=data["name"],
                kind=data["kind"],
                scope=data["scope"],
                tenant=data["tenant"],
                pool=data["pool"],
                threshold=data["threshold"],
                window_minutes=data["window_minutes"],
                channels=data["channels"],
            )
            return redirect("alerts-rules")
        status = 400
    listed = list(selectors.rules_visible_to(user).order_by("scope", "name"))
    ctx = {
        "rules": [(r, selectors.may_manage(user, r.tenant), THRESHOLDS[r.kind][3]) for r in listed],
        "form": form,
        "can_add": selectors.may_manage(user, roles.tenant_of(user)),
        "thresholds": [(k, THRESHOLDS[k]) for k in THRESHOLDS],
    }
    return _page(request, "alerts/rules.html", ctx, status)


@require_POST
@login_required
def rule_toggle(request: HttpRequest, rule: str) -> HttpResponse:
    user = _person(request)
    r = selectors.rules_visible_to(user).filter(uuid=rule).first()
    if r is None:
        raise Http404
    try:
        services.alert_rule_toggle(actor=user, rule=r)
    except services.NotAllowed as exc:
        return HttpResponseForbidden(str(exc))
    return redirect("alerts-rules")


@require_http_methods(["GET", "POST"])
@login_required
def webhooks(request: HttpRequest) -> HttpResponse:
    user = _person(request)
    form = WebhookEndpointForm(request.POST or None, user=user)
    status = 200
    if request.method == "POST":
        if not selectors.may_manage(user, roles.tenant_of(user)):
            return HttpResponseForbidden("you may not add webhook endpoints")
        if form.is_valid():
            d = form.cleaned_data
            ep = services.webhook_endpoint_create(actor=user, tenant=d["tenant"], name=d["name"], url=d["url"])
            return redirect("alerts-webhook", endpoint=ep.uuid)
        status = 400
    endpoints = list(selectors.endpoints_visible_to(user))
    ctx = {"endpoints": endpoints, "form": form, "can_add": selectors.may_manage(user, roles.tenant_of(user))}
    return _page(request, "alerts/webhooks.html", ctx, status)


@login_required
def webhook(request: HttpRequest, endpoint: str) -> HttpResponse:
    user = _person(request)
    ep = selectors.endpoints_visible_to(user).filter(uuid=endpoint).first()
    if ep is None:
        raise Http404
    ctx = {"ep": ep, "deliveries": selectors.deliveries_of(ep), "can_manage": selectors.may_manage(user, ep.tenant)}
    return _page(request, "alerts/webhook.html", ctx)


@require_POST
@login_required
def webhook_test(request: HttpRequest, endpoint: str) -> HttpResponse:
    user = _person(request)
    ep = selectors.endpoints_visible_to(user).filter(uuid=endpoint).first()
    if ep is None:
        raise Http404
    try:
        services.webhook_test_fire(actor=user, endpoint=ep)
    except services.NotAllowed as exc:
        return HttpResponseForbidden(str(exc))
    return redirect("alerts-webhook", endpoint=ep.uuid)
