"""`/tokens/`: people create, scope, expire and revoke their API tokens; the key is shown once.

Operators also manage the tokens of gateway accounts (which cannot sign in). Writes go through
entitlements.token_services; a bad field is a 400 with the form naming it. Both writes answer with a
redirect (POST-redirect-GET, docs/pages.md): reloading the list never files a second token. The new key
travels to that one GET in the session and is removed as it is shown. Revoking asks first: the list's
Revoke button posts without `confirm` and gets a confirmation page; only its Revoke posts `confirm=yes`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from entitlements import roles, token_services
from entitlements.models import ApiToken, Tenant
from http_plumbing.form_errors import add_validation_errors
from portal import access


class TokenForm(forms.Form):
    name = forms.CharField(max_length=80)
    scope = forms.ChoiceField(choices=ApiToken.Scope.choices, initial=ApiToken.Scope.READ)
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), required=False, to_field_name="slug")
    expires_in_days = forms.IntegerField(min_value=1, max_value=366, required=False, initial=90)
    owner = forms.ModelChoiceField(queryset=get_user_model().objects.none(), required=False, to_field_name="username")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        own = roles.tenant_of(user)
        self.fields["tenant"].queryset = (  # type: ignore[attr-defined]  # a ModelChoiceField
            Tenant.objects.filter(pk=own.pk)
            if own
            else Tenant.objects.all()
            if roles.is_staff_role(user)
            else Tenant.objects.none()
        )
        self.fields["owner"].queryset = gateway_accounts(user)  # type: ignore[attr-defined]


def gateway_accounts(user: Any) -> Any:
    """Accounts whose tokens this person manages besides their own: operators, gateway-only accounts."""
    User = get_user_model()
    if not roles.has_any(user, roles.OPERATOR):
        return User.objects.none()
    gateways = User.objects.filter(platform_roles__role=roles.GATEWAY).exclude(
        platform_roles__role__in=[roles.APPROVER, roles.OPERATOR]
    )
    return gateways.filter(membership__isnull=True).order_by("username")


def _visible_tokens(user: Any) -> Any:
    owners = [user.pk, *gateway_accounts(user).values_list("pk", flat=True)]
    return ApiToken.objects.filter(user_id__in=owners).select_related("user", "tenant").order_by("-created_at")


NEW_KEY = "tokens.new_key"


def _page(request: HttpRequest, form: TokenForm, *, new_key: str = "", status: int = 200) -> HttpResponse:
    context = {"form": form, "tokens": _visible_tokens(request.user), "new_key": new_key, "now": timezone.now()}
    response = render(request, "portal/tokens/tokens.html", context, status=status)
    if new_key:
        response["Cache-Control"] = "no-store"  # the key is on this page once: keep it out of caches
    return response


def _person(request: HttpRequest) -> None:
    access.require_person(request, message="gateway accounts have no pages")


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    _person(request)
    if request.method == "GET":
        return _page(request, TokenForm(user=request.user), new_key=request.session.pop(NEW_KEY, ""))
    form = TokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return _page(request, form, status=400)
    data = form.cleaned_data
    days = data.get("expires_in_days")
    try:
        _, key = token_services.token_create(
            actor=request.user,
            owner=data.get("owner"),
            name=data["name"],
            scope=data["scope"],
            tenant=data.get("tenant"),
            expires_at=timezone.now() + timedelta(days=days) if days else None,
        )
    except ValidationError as exc:
        add_validation_errors(form, exc)
        return _page(request, form, status=400)
    request.session[NEW_KEY] = key
    return redirect("tokens", permanent=False)


@login_required
@require_POST
def revoke(request: HttpRequest) -> HttpResponse:
    _person(request)
    raw = request.POST.get("token", "")
    # isascii: "²".isdigit() is true and int("²") raises; 18 digits stay within a bigint
    token = (
        _visible_tokens(request.user).filter(pk=int(raw)).first()
        if raw.isascii() and raw.isdigit() and len(raw) <= 18
        else None
    )
    if token is None:
        raise Http404("no such token")
    if request.POST.get("confirm") != "yes":
        return render(request, "portal/tokens/revoke_confirm.html", {"token": token})
    token_services.token_revoke(actor=request.user, token=token)
    return redirect("tokens", permanent=False)
