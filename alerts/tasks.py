"""Celery entry points, kept thin. Inline under the embedded default (CELERY_TASK_ALWAYS_EAGER)."""

from __future__ import annotations

from datetime import datetime

from celery import Task, shared_task
from django.utils.dateparse import parse_datetime

from alerts import emails, evaluation, retention, webhooks


@shared_task(acks_late=True)
def evaluate_rules(now: str | None = None) -> dict[str, int]:
    """Target of the beat schedule (every minute)."""
    when: datetime | None = parse_datetime(now) if now else None
    return evaluation.alert_rules_evaluate(now=when)


@shared_task(bind=True, acks_late=True, max_retries=3)
def send_notification_emails(self: Task, notification_ids: list[int]) -> int:
    try:
        return emails.notification_emails_send(notification_ids=notification_ids)
    except emails.MailFailed as exc:
        raise self.retry(exc=exc, countdown=60 * (self.request.retries + 1))


@shared_task(acks_late=True)
def deliver_webhook(delivery_id: int) -> str:
    return webhooks.webhook_delivery_attempt(delivery_id=delivery_id)


@shared_task(acks_late=True)
def deliver_due_webhooks() -> int:
    """Target of the beat schedule (every 15 s): the retries whose backoff has passed."""
    due = webhooks.due_deliveries()
    for pk in due:
        deliver_webhook.delay(pk)
    return len(due)


@shared_task(acks_late=True)
def sweep_alerts() -> dict[str, int]:
    """Target of the daily beat schedule: delivery log and read inbox rows past retention."""
    return retention.alerts_sweep()
