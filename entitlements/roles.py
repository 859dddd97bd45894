"""Who may do what: one place that reads a person's roles.

Roles: `viewer`, `requester` (members of one tenant), `approver`, `operator`, `gateway` (platform).
"""

from __future__ import annotations

from typing import Any

VIEWER = "viewer"
REQUESTER = "requester"
APPROVER = "approver"
OPERATOR = "operator"
GATEWAY = "gateway"
STAFF_ROLES = frozenset({APPROVER, OPERATOR})


def roles_of(user: Any) -> frozenset[str]:
    """Cached on the user object for the request's lifetime."""
    if user is None or not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_headroom_roles", None)
    if cached is not None:
        return cached
    from entitlements.models import Membership, PlatformRole

    roles = set(PlatformRole.objects.filter(user=user).values_list("role", flat=True))
    membership = Membership.objects.filter(user=user).select_related("tenant").first()
    user._headroom_tenant = membership.tenant if membership else None
    if membership:
        roles.add(membership.role)
    result = frozenset(roles)
    user._headroom_roles = result
    return result


def tenant_of(user: Any) -> Any:
    """The tenant a member belongs to, or None for platform people."""
    roles_of(user)
    return getattr(user, "_headroom_tenant", None)


def has_any(user: Any, *roles: str) -> bool:
    return bool(roles_of(user) & set(roles))


def is_staff_role(user: Any) -> bool:
    return has_any(user, APPROVER, OPERATOR)


def is_person(user: Any) -> bool:
    """Whom the web pages and the person API endpoints serve: signed in, with a role other than
    gateway. A gateway-only account (a serving-path token, it cannot sign in) and an account with no
    role are not people here. The one rule behind IsPerson and portal.access.require_person."""
    return bool(roles_of(user) - {GATEWAY})


def may_grant_platform_roles(user: Any) -> bool:
    """Superusers only (README, "Access and audit"): no operator can widen anyone's platform access."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


def may_manage_memberships(user: Any) -> bool:
    return may_grant_platform_roles(user) or has_any(user, OPERATOR)
