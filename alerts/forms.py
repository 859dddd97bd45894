"""Forms for rules and endpoints. A tenant member's rule and endpoint always belong to their own
tenant (the form has no tenant field for them); operators choose a tenant, a pool or the platform."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.validators import URLValidator

from alerts.conditions import SCOPES, THRESHOLDS
from alerts.models import CHANNELS, AlertRule
from entitlements import roles
from entitlements.models import Pool, Tenant


class AlertRuleForm(forms.Form):
    name = forms.CharField(max_length=120)
    kind = forms.ChoiceField(choices=AlertRule.Kind.choices)
    scope = forms.ChoiceField(choices=AlertRule.Scope.choices, required=False)
    tenant = forms.ModelChoiceField(Tenant.objects.all(), to_field_name="slug", required=False)
    pool = forms.ModelChoiceField(Pool.objects.all(), to_field_name="slug", required=False)
    threshold = forms.FloatField(required=False, help_text="blank: the kind's default")
    window_minutes = forms.IntegerField(min_value=1, max_value=1440, initial=15)
    channels = forms.MultipleChoiceField(
        choices=[(c, c) for c in CHANNELS], required=False, widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.own_tenant = None if roles.OPERATOR in roles.roles_of(user) else roles.tenant_of(user)
        if self.own_tenant is not None:
            for f in ("scope", "tenant", "pool"):
                del self.fields[f]
            cast(forms.ChoiceField, self.fields["kind"]).choices = [
                (k, v) for k, v in AlertRule.Kind.choices if "tenant" in SCOPES[k]
            ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.own_tenant is not None:
            data.update(scope="tenant", tenant=self.own_tenant, pool=None)
        scope, kind = data.get("scope") or "", data.get("kind")
        if scope == "tenant" and not data.get("tenant"):
            self.add_error("tenant", "choose the tenant this rule watches")
        if scope == "pool" and not data.get("pool"):
            self.add_error("pool", "choose the pool this rule watches")
        if not scope:
            self.add_error("scope", "choose tenant, pool or platform")
        if scope != "tenant":
            data["tenant"] = None
        if scope != "pool":
            data["pool"] = None
        if kind and scope and scope not in SCOPES[kind]:
            self.add_error("kind", f"this kind watches {' or '.join(SCOPES[kind])} scopes, not {scope}")
        if kind:
            default, low, high, unit = THRESHOLDS[kind]
            t = data.get("threshold")
            if t is None:
                data["threshold"] = default
            elif not low <= t <= high:
                self.add_error("threshold", f"must be between {low:g} and {high:g} ({unit})")
        return data


class WebhookEndpointForm(forms.Form):
    name = forms.CharField(max_length=120)
    url = forms.CharField(max_length=500, validators=[URLValidator(schemes=["http", "https"])])
    tenant = forms.ModelChoiceField(
        Tenant.objects.all(), to_field_name="slug", required=False, help_text="blank: an operators' endpoint"
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.own_tenant = None if roles.OPERATOR in roles.roles_of(user) else roles.tenant_of(user)
        if self.own_tenant is not None:
            del self.fields["tenant"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.own_tenant is not None:
            data["tenant"] = self.own_tenant
        return data
