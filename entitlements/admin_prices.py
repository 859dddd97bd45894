"""Admin for the price list (docs/contract.md §10): operators (and superusers) edit it; a reason is required
and every add, change and delete lands in the price audit with who and why (entitlements.prices)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from entitlements import prices, roles
from entitlements.models import Price, PriceChange


class PriceForm(forms.ModelForm):
    reason = forms.CharField(max_length=prices.REASON_MAX, help_text="Why this price changes; kept in the price audit.")

    class Meta:
        model = Price
        fields = ["accelerator", "region", "term", "usd_per_accelerator_hour", "effective_from", "source"]


def _may_edit(request: HttpRequest) -> bool:
    return roles.may_grant_platform_roles(request.user) or roles.has_any(request.user, roles.OPERATOR)


@admin.register(Price)
class PriceAdmin(admin.ModelAdmin):
    form = PriceForm
    list_display = ["accelerator", "region", "term", "usd_per_accelerator_hour", "effective_from", "source"]
    list_filter = ["term", "region", "accelerator"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _may_edit(request) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _may_edit(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _may_edit(request) and super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Price, form: Any, change: bool) -> None:
        prices.price_save(actor=request.user, reason=form.cleaned_data["reason"], price=obj)

    def delete_model(self, request: HttpRequest, obj: Price) -> None:
        prices.price_delete(actor=request.user, reason=f"removed in the admin by {request.user}", price=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(PriceChange)
class PriceChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "op", "price_id", "before", "after", "actor", "reason"]
    list_filter = ["op"]
    search_fields = ["reason", "price_id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
