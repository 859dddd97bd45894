"""Writes from people: the inbox, rules, endpoints, test-fire. Callers check visibility with the
selectors first (404 for what a person may not see); these check the right to change it."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from alerts.models import AlertRule, Notification, WebhookDelivery, WebhookEndpoint
from alerts.selectors import may_manage
from alerts.webhooks import webhook_event_enqueue


class NotAllowed(Exception):
    pass


def notification_mark_read(*, user: Any, notification: Notification) -> None:
    if notification.user_id != user.pk:
        raise NotAllowed("not your notification")
    Notification.objects.filter(pk=notification.pk, read_at__isnull=True).update(read_at=timezone.now())


def notifications_mark_all_read(*, user: Any) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=timezone.now())


@transaction.atomic
def alert_rule_create(*, actor: Any, **fields: Any) -> AlertRule:
    if not may_manage(actor, fields.get("tenant")):
        raise NotAllowed("you may not add rules here")
    return AlertRule.objects.create(created_by=actor, **fields)


@transaction.atomic
def alert_rule_toggle(*, actor: Any, rule: AlertRule) -> AlertRule:
    if not may_manage(actor, rule.tenant):
        raise NotAllowed("you may not change this rule")
    rule = AlertRule.objects.select_for_update().get(pk=rule.pk)
    rule.enabled = not rule.enabled
    rule.save(update_fields=["enabled"])
    return rule


@transaction.atomic
def webhook_endpoint_create(*, actor: Any, tenant: Any, name: str, url: str) -> WebhookEndpoint:
    if not may_manage(actor, tenant):
        raise NotAllowed("you may not add endpoints here")
    return WebhookEndpoint.objects.create(created_by=actor, tenant=tenant, name=name, url=url)


@transaction.atomic
def webhook_test_fire(*, actor: Any, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """A signed `ping` event through the same path as real ones (log, retries), sent after commit."""
    if not may_manage(actor, endpoint.tenant):
        raise NotAllowed("you may not test this endpoint")
    (delivery,) = webhook_event_enqueue(
        endpoints=[endpoint],
        event_type="ping",
        data={"endpoint": str(endpoint.uuid), "by": actor.get_username(), "note": "test fire from the portal"},
    )
    return delivery
