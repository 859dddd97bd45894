"""DRF permission classes built on entitlements.roles."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from entitlements import roles


class _RolePermission(BasePermission):
    allowed: frozenset[str] = frozenset()

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(roles.roles_of(request.user) & self.allowed)


class IsGateway(_RolePermission):
    allowed = frozenset({roles.GATEWAY})


class IsOperator(_RolePermission):
    allowed = frozenset({roles.OPERATOR})


class IsStaffRole(_RolePermission):
    """Approvers and operators."""

    allowed = frozenset({roles.APPROVER, roles.OPERATOR})


class IsPerson(BasePermission):
    """People (roles.is_person): not gateway-only accounts, which reach the serving-path endpoints only."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return roles.is_person(request.user)


class StaffReadOperatorWrite(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        r = roles.roles_of(request.user)
        if request.method in SAFE_METHODS:
            return bool(r & {roles.APPROVER, roles.OPERATOR})
        return roles.OPERATOR in r


class MemberReadOperatorWrite(BasePermission):
    """Tenant members and staff read (querysets narrow what they see); operators write."""

    def has_permission(self, request: Any, view: Any) -> bool:
        r = roles.roles_of(request.user)
        if request.method in SAFE_METHODS:
            return bool(r & {roles.VIEWER, roles.REQUESTER, roles.APPROVER, roles.OPERATOR})
        return roles.OPERATOR in r
