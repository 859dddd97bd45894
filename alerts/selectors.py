"""Reads. Rules, endpoints and deliveries go through `…_visible_to(user)`: approvers and operators
see everything, a tenant member sees their tenant's, nobody sees another tenant's."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from alerts.models import AlertEpisode, AlertRule, Notification, WebhookDelivery, WebhookEndpoint
from entitlements import roles


def _tenant_filter(qs: QuerySet[Any], user: Any) -> QuerySet[Any]:
    r = roles.roles_of(user)
    if r & roles.STAFF_ROLES:
        return qs
    tenant = roles.tenant_of(user)
    return qs.filter(tenant=tenant) if tenant is not None else qs.none()


def rules_visible_to(user: Any) -> QuerySet[AlertRule]:
    return _tenant_filter(AlertRule.objects.select_related("tenant", "pool"), user)


def endpoints_visible_to(user: Any) -> QuerySet[WebhookEndpoint]:
    return _tenant_filter(WebhookEndpoint.objects.select_related("tenant"), user)


def episodes_of(rule: AlertRule, limit: int = 20) -> list[AlertEpisode]:
    return list(rule.episodes.order_by("-opened_at")[:limit])


def deliveries_of(endpoint: WebhookEndpoint, limit: int = 100) -> list[WebhookDelivery]:
    return list(endpoint.deliveries.order_by("-next_attempt_at", "-attempt")[:limit])


def inbox_of(user: Any, limit: int = 200) -> list[Notification]:
    return list(Notification.objects.filter(user=user).order_by("-created_at", "-id")[:limit])


def unread_count(user: Any) -> int:
    if user is None or not user.is_authenticated:
        return 0
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def may_manage(user: Any, tenant: Any) -> bool:
    """Operators manage every rule and endpoint; a tenant's requesters manage their tenant's."""
    r = roles.roles_of(user)
    if roles.OPERATOR in r:
        return True
    return tenant is not None and roles.REQUESTER in r and roles.tenant_of(user) == tenant
