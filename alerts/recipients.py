"""Who hears about what: tenant members for a tenant's things, approvers and operators for the
platform's. Webhook endpoints follow the same split (a tenant's own, or the operators')."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from entitlements.models import Membership, PlatformRole, Tenant


def tenant_members(tenant: Tenant) -> QuerySet[Any]:
    ids = Membership.objects.filter(tenant=tenant).values("user_id")
    return get_user_model().objects.filter(pk__in=ids, is_active=True).order_by("pk")


def platform_staff(*, roles: tuple[str, ...] = ("approver", "operator")) -> QuerySet[Any]:
    ids = PlatformRole.objects.filter(role__in=roles).values("user_id")
    return get_user_model().objects.filter(pk__in=ids, is_active=True).order_by("pk")
