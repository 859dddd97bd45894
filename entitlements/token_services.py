"""Self-service API tokens: create (the key is returned once), revoke (effective at once everywhere).

A person creates tokens for themselves; an operator may also create one for a gateway account (which
cannot sign in to the portal). A tenant member may scope a token to their own tenant only; staff to
any tenant. Only the key's hash is stored.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from entitlements import roles
from entitlements.auth import bump_revocation_epoch
from entitlements.models import ApiToken, Tenant

MAX_LIFETIME = timedelta(days=366)
MAX_ACTIVE_PER_USER = 50


def may_issue_for(actor: Any, owner: Any) -> bool:
    if actor.pk == owner.pk:
        return True
    return roles.has_any(actor, roles.OPERATOR) and roles.roles_of(owner) == frozenset({roles.GATEWAY})


@transaction.atomic
def token_create(
    *,
    actor: Any,
    name: str,
    scope: str,
    owner: Any = None,
    tenant: Tenant | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiToken, str]:
    owner = owner or actor
    if not may_issue_for(actor, owner):
        raise PermissionDenied("you may create tokens for yourself (operators: also for gateway accounts)")
    name = (name or "").strip()
    if not name or len(name) > 80:
        raise ValidationError({"name": "a name of 1 to 80 characters"})
    if scope not in ApiToken.Scope.values:
        raise ValidationError({"scope": f"one of {', '.join(ApiToken.Scope.values)}"})
    if scope == ApiToken.Scope.GATEWAY and roles.GATEWAY not in roles.roles_of(owner):
        raise ValidationError({"scope": "gateway tokens are for gateway accounts"})
    own_tenant = roles.tenant_of(owner)
    if tenant is not None and own_tenant is not None and tenant.pk != own_tenant.pk:
        raise ValidationError({"tenant": "a member's token can only be scoped to their own tenant"})
    if tenant is not None and own_tenant is None and not roles.is_staff_role(owner):
        raise ValidationError({"tenant": "only members and staff scope tokens to a tenant"})
    now = timezone.now()
    if expires_at is not None and not (now < expires_at <= now + MAX_LIFETIME):
        raise ValidationError({"expires_at": "a time in the future, at most 366 days ahead"})
    if ApiToken.objects.filter(user=owner, revoked_at__isnull=True).count() >= MAX_ACTIVE_PER_USER:
        raise ValidationError({"name": f"at most {MAX_ACTIVE_PER_USER} active tokens; revoke one first"})
    return ApiToken.issue(owner, name=name, scope=scope, tenant=tenant, expires_at=expires_at)


@transaction.atomic
def token_revoke(*, actor: Any, token: ApiToken, staff: bool = False) -> bool:
    """Revoke; True if this call revoked it. `staff`: the admin's revoke action (operators)."""
    locked = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
    if not (
        may_issue_for(actor, locked.user) or (staff and (actor.is_superuser or roles.has_any(actor, roles.OPERATOR)))
    ):
        raise PermissionDenied("not your token")
    if locked.revoked_at is not None:
        return False
    locked.revoked_at = timezone.now()
    locked.save(update_fields=["revoked_at"])
    # Bumped after commit: a process that re-verifies the key in between must already see the revocation.
    transaction.on_commit(bump_revocation_epoch)
    token.revoked_at = locked.revoked_at
    return True
