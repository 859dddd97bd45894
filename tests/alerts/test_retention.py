"""Retention keeps what someone still needs: unread rows, pending deliveries, open episodes."""

from __future__ import annotations

from datetime import timedelta

from alerts.models import AlertEpisode, Notification, WebhookDelivery, WebhookEndpoint
from alerts.tasks import sweep_alerts
from tests.alerts.conftest import now, rule


def test_sweep_removes_old_read_rows_and_finished_deliveries_only(fleet, people, settings):
    settings.ALERTS_RETENTION_DAYS = 30
    old = now() - timedelta(days=31)
    recent = now() - timedelta(days=29)
    for title, read_at in (("old read", old), ("old unread", None), ("recent read", recent)):
        n = Notification.objects.create(user=people.viewer, kind="alert.opened", title=title, read_at=read_at)
        Notification.objects.filter(pk=n.pk).update(created_at=old)
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="h", url="https://h.example.org/")
    for i, (status, at) in enumerate((("delivered", old), ("failed", old), ("pending", old), ("delivered", recent))):
        WebhookDelivery.objects.create(
            endpoint=ep,
            event_id=f"00000000-0000-0000-0000-00000000000{i}",
            event_type="ping",
            payload={},
            status=status,
            next_attempt_at=at,
        )
    r = rule(channels=[])
    gone = AlertEpisode.objects.create(rule=r, subject_key="a", summary="old, resolved", opened_at=old, resolved_at=old)
    Notification.objects.filter(title="old unread").update(episode=gone)  # outlives its episode
    AlertEpisode.objects.create(rule=r, subject_key="b", summary="old, open", opened_at=old)

    assert sweep_alerts.delay().get() == {"deliveries": 2, "notifications": 1, "episodes": 1}
    assert sorted(Notification.objects.values_list("title", flat=True)) == ["old unread", "recent read"]
    assert sorted(WebhookDelivery.objects.values_list("status", flat=True)) == ["delivered", "pending"]
    assert list(AlertEpisode.objects.values_list("summary", flat=True)) == ["old, open"]
