"""Admin for people and access: users, platform roles, memberships, the access audit and API tokens.

Every role or membership write goes through entitlements.role_services (superusers alone grant
platform roles; a reason is required and lands in the append-only access audit). Non-superusers
cannot touch superuser accounts or the superuser, staff, group and permission fields, so staff
access in the admin cannot be widened from inside it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.http import HttpRequest

from entitlements import role_services, roles, token_services
from entitlements.models import ApiToken, Membership, PlatformRole, RoleChange

User = get_user_model()
GUARDED_USER_FIELDS = ("is_superuser", "is_staff", "groups", "user_permissions")


class ReasonForm(forms.ModelForm):
    reason = forms.CharField(max_length=500, help_text="Why this access changes; kept in the access audit.")


def _reason(request: HttpRequest, what: str) -> str:
    return f"{what} in the admin by {request.user}"


class _AuditedAdmin(admin.ModelAdmin):
    """A bulk delete goes row by row through delete_model: each removal is audited with its reason."""

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(PlatformRole)
class PlatformRoleAdmin(_AuditedAdmin):
    form = ReasonForm
    list_display = ["user", "role"]
    list_filter = ["role"]
    autocomplete_fields = ["user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return roles.may_grant_platform_roles(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return roles.may_grant_platform_roles(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return roles.may_grant_platform_roles(request.user)

    def save_model(self, request: HttpRequest, obj: PlatformRole, form: Any, change: bool) -> None:
        role_services.platform_role_change(
            actor=request.user, row=obj, user=obj.user, role=obj.role, reason=form.cleaned_data["reason"]
        )

    def delete_model(self, request: HttpRequest, obj: PlatformRole) -> None:
        role_services.platform_role_remove(actor=request.user, row=obj, reason=_reason(request, "removed"))


@admin.register(Membership)
class MembershipAdmin(_AuditedAdmin):
    form = ReasonForm
    list_display = ["user", "tenant", "role"]
    list_filter = ["tenant", "role"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return roles.may_manage_memberships(request.user) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return roles.may_manage_memberships(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return roles.may_manage_memberships(request.user) and super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        role_services.membership_save(actor=request.user, row=obj, reason=form.cleaned_data["reason"])

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        role_services.membership_remove(actor=request.user, row=obj, reason=_reason(request, "removed"))


@admin.register(RoleChange)
class RoleChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "table_name", "op", "user_id", "snapshot", "actor", "reason"]
    list_filter = ["table_name", "op"]
    search_fields = ["reason", "user_id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Keys are shown once, at creation (the portal's /tokens/ page or create_api_token); here an
    operator sees who holds what and revokes."""

    list_display = [
        "prefix",
        "name",
        "user",
        "scope",
        "tenant",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["scope", "revoked_at"]
    search_fields = ["prefix", "name", "user__username"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        if not request.user.has_perm("entitlements.change_apitoken"):
            actions.pop("revoke", None)
        return actions

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        n = sum(1 for t in queryset if token_services.token_revoke(actor=request.user, token=t, staff=True))
        self.message_user(request, f"{n} token(s) revoked", level=messages.SUCCESS)


class GuardedUserAdmin(UserAdmin):
    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else fields + GUARDED_USER_FIELDS

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


class GuardedGroupAdmin(GroupAdmin):
    """A group carries permissions: only superusers edit them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)


for model, model_admin in ((User, GuardedUserAdmin), (Group, GuardedGroupAdmin)):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, model_admin)
