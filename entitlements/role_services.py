"""Role and membership writes: who may grant what, always with who and why.

Platform roles (approver, operator, gateway) are granted and removed by superusers only: an operator
who could grant `approver` could decide launch requests, and one who could make anyone an operator
has no limit. Tenant memberships are the operators' job (onboarding a tenant's people). Every write
runs inside `history_context`, so the access audit's trigger records the actor and the reason.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from entitlements import roles
from entitlements.history import history_context
from entitlements.models import Membership, PlatformRole, Tenant


def _need_reason(reason: str) -> None:
    if not (reason or "").strip():
        raise ValidationError({"reason": "say why this access changes"})


def _check_platform(actor: Any) -> None:
    if not roles.may_grant_platform_roles(actor):
        raise PermissionDenied("only a superuser grants or removes platform roles")


def _check_membership(actor: Any) -> None:
    if not roles.may_manage_memberships(actor):
        raise PermissionDenied("only operators and superusers change tenant memberships")


@transaction.atomic
def platform_role_grant(*, actor: Any, user: Any, role: str, reason: str) -> PlatformRole:
    _check_platform(actor)
    _need_reason(reason)
    if role not in PlatformRole.Role.values:
        raise ValidationError({"role": f"one of {', '.join(PlatformRole.Role.values)}"})
    with history_context(actor=actor, reason=reason):
        row, _ = PlatformRole.objects.get_or_create(user=user, role=role)
    return row


@transaction.atomic
def platform_role_change(*, actor: Any, row: PlatformRole, user: Any, role: str, reason: str) -> PlatformRole:
    _check_platform(actor)
    _need_reason(reason)
    row.user, row.role = user, role
    with history_context(actor=actor, reason=reason):
        row.save()
    return row


@transaction.atomic
def platform_role_remove(*, actor: Any, row: PlatformRole, reason: str) -> None:
    _check_platform(actor)
    _need_reason(reason)
    with history_context(actor=actor, reason=reason):
        row.delete()


@transaction.atomic
def membership_set(*, actor: Any, user: Any, tenant: Tenant, role: str, reason: str) -> Membership:
    _check_membership(actor)
    _need_reason(reason)
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"one of {', '.join(Membership.Role.values)}"})
    with history_context(actor=actor, reason=reason):
        row, _ = Membership.objects.update_or_create(user=user, defaults={"tenant": tenant, "role": role})
    return row


@transaction.atomic
def membership_remove(*, actor: Any, row: Membership, reason: str) -> None:
    _check_membership(actor)
    _need_reason(reason)
    with history_context(actor=actor, reason=reason):
        row.delete()


@transaction.atomic
def membership_save(*, actor: Any, row: Membership, reason: str) -> Membership:
    """Save a membership as edited (the admin's form), under the same rules as membership_set."""
    _check_membership(actor)
    _need_reason(reason)
    with history_context(actor=actor, reason=reason):
        row.save()
    return row
