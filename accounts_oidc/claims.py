"""Claims → Headroom access, and the re-sync at every sign-in.

What claims may do is bounded by settings, never by the provider: `OIDC_TENANT_CLAIM` names one tenant
(by slug, through `OIDC_TENANT_MAP` when the provider's names differ), `OIDC_ROLES_CLAIM` holds values
mapped by `OIDC_ROLE_MAP` to Headroom roles, and only roles in `OIDC_CLAIM_GRANTABLE_ROLES` are ever
granted or removed from claims. Roles outside that set are the superusers' (the admin) and a sign-in
leaves them alone. Tenants are never created here: an unknown tenant refuses the sign-in.

The writes go through entitlements.role_services with `ClaimsAuthority` as the actor: the deployment
delegated exactly the grantable roles to the provider, and the role services' own checks, validation
and audit (actor null, reason naming the issuer and subject) apply as for any other grant.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts_oidc.conf import PLATFORM_ROLES, TENANT_ROLES
from entitlements import role_services
from entitlements.models import Membership, PlatformRole, Tenant

log = logging.getLogger(__name__)


class SignInRefused(Exception):
    """The claims do not let this person in; `message` is shown to them, `status` is the page's."""

    def __init__(self, message: str, *, title: str = "Sign-in refused", status: int = 403) -> None:
        super().__init__(message)
        self.message, self.title, self.status = message, title, status


class UnknownTenant(SignInRefused):
    def __init__(self, claimed: str, slug: str) -> None:
        named = f"“{claimed}”" if claimed == slug else f"“{claimed}” (tenant “{slug}”)"
        super().__init__(
            f"Your identity provider says you belong to the tenant {named}, which Headroom does not know. "
            "Nothing was created. Ask a Headroom operator to set that tenant up, or your identity provider's "
            "administrators to correct the claim.",
            title="Unknown tenant",
        )
        self.claimed, self.slug = claimed, slug


@dataclass(frozen=True)
class ClaimsAuthority:
    """The actor of claim-driven role writes: the provider, within OIDC_CLAIM_GRANTABLE_ROLES (checked here,
    before role_services is called). `pk` None: the audit row's actor is empty, its reason names the source."""

    pk: None = None
    is_active: bool = True
    is_superuser: bool = True
    is_authenticated: bool = True


@dataclass(frozen=True)
class Access:
    tenant: Tenant | None
    tenant_role: str | None
    platform_roles: frozenset[str]
    ignored: frozenset[str]  # mapped from claims, but not grantable by claims here

    @property
    def grants_anything(self) -> bool:
        return bool(self.tenant_role or self.platform_roles)


def _values(raw: Any, *, split: bool = True) -> list[str]:
    """A claim as a list of strings: a JSON list, or one string (split on commas and spaces if `split`)."""
    if raw is None:
        return []
    if isinstance(raw, list | tuple):
        return [str(v).strip() for v in raw if str(v).strip()]
    if not split:
        return [str(raw).strip()] if str(raw).strip() else []
    return [v for v in str(raw).replace(",", " ").split() if v]


def grantable() -> frozenset[str]:
    return frozenset(settings.OIDC_CLAIM_GRANTABLE_ROLES)


def access_from_claims(claims: dict[str, Any]) -> Access:
    """What these claims grant here. Raises SignInRefused (UnknownTenant) without writing anything."""
    role_map: dict[str, str] = settings.OIDC_ROLE_MAP or {r: r for r in TENANT_ROLES + PLATFORM_ROLES}
    mapped = {role_map[v] for v in _values(claims.get(settings.OIDC_ROLES_CLAIM)) if v in role_map}
    allowed = grantable()
    granted, ignored = mapped & allowed, frozenset(mapped - allowed)

    tenant: Tenant | None = None
    tenant_role: str | None = None
    names = list(dict.fromkeys(_values(claims.get(settings.OIDC_TENANT_CLAIM), split=False)))
    if len(names) > 1:
        raise SignInRefused(
            f"Your identity provider names more than one tenant ({', '.join(names)}); a Headroom member belongs "
            "to exactly one. Ask its administrators to send one.",
            title="More than one tenant",
        )
    if names:
        slug = settings.OIDC_TENANT_MAP.get(names[0], names[0])
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise UnknownTenant(names[0], slug)
        default = settings.OIDC_DEFAULT_TENANT_ROLE
        for role in ("requester", "viewer"):  # the wider tenant role wins
            if role in granted:
                tenant_role = role
                break
        else:
            tenant_role = default if default and default in allowed else None
    return Access(
        tenant=tenant if tenant_role else None,
        tenant_role=tenant_role,
        platform_roles=frozenset(granted & set(PLATFORM_ROLES)),
        ignored=ignored,
    )


def _platform_rows(user: Any, roles: Iterable[str]) -> list[PlatformRole]:
    return list(PlatformRole.objects.filter(user=user, role__in=list(roles)))


@transaction.atomic
def sync(user: Any, access: Access, *, reason: str) -> list[str]:
    """Make the user's claim-managed access equal `access`; returns what changed, in words."""
    actor, allowed, changes = ClaimsAuthority(), grantable(), []
    if allowed & set(TENANT_ROLES):  # memberships are claim-managed
        current = Membership.objects.filter(user=user).select_related("tenant").first()
        if access.tenant is None:
            if current is not None and current.role in allowed:
                role_services.membership_remove(actor=actor, row=current, reason=reason)
                changes.append(f"membership {current.role} of {current.tenant.slug} removed")
        elif current is None or (current.tenant_id, current.role) != (access.tenant.pk, access.tenant_role):
            role_services.membership_set(
                actor=actor, user=user, tenant=access.tenant, role=str(access.tenant_role), reason=reason
            )
            changes.append(f"membership {access.tenant_role} of {access.tenant.slug}")
    managed = allowed & set(PLATFORM_ROLES)
    for row in _platform_rows(user, managed - access.platform_roles):
        role_services.platform_role_remove(actor=actor, row=row, reason=reason)
        changes.append(f"{row.role} removed")
    have = {r.role for r in _platform_rows(user, access.platform_roles)}
    for role in sorted(access.platform_roles - have):
        role_services.platform_role_grant(actor=actor, user=user, role=role, reason=reason)
        changes.append(f"{role} granted")
    if access.ignored:
        log.warning(
            "OIDC claims of %s name roles claims may not grant here: %s", user, ", ".join(sorted(access.ignored))
        )
    for attr in ("_headroom_roles", "_headroom_tenant"):  # entitlements.roles caches on the user object
        user.__dict__.pop(attr, None)
    return changes
