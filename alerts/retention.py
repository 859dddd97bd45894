"""Bounded growth: the delivery log and read inbox rows are kept for a set number of days.

Open episodes are never swept; unread notifications are kept whatever their age (somebody has not
seen them yet); a delivery still pending is kept until it is delivered or failed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from alerts.models import AlertEpisode, Notification, WebhookDelivery

Status = WebhookDelivery.Status


def alerts_sweep(*, now: datetime | None = None) -> dict[str, int]:
    now = now or timezone.now()
    days = settings.ALERTS_RETENTION_DAYS
    cutoff = now - timedelta(days=days)
    deliveries, _ = WebhookDelivery.objects.filter(
        status__in=(Status.DELIVERED, Status.RETRIED, Status.FAILED), next_attempt_at__lt=cutoff
    ).delete()
    notes, _ = Notification.objects.filter(read_at__lt=cutoff).delete()
    episodes, _ = AlertEpisode.objects.filter(resolved_at__lt=cutoff).delete()
    return {"deliveries": deliveries, "notifications": notes, "episodes": episodes}
