"""Email leaves from a Celery task (inline under the embedded default) after the transaction
commits, never inside the request that caused it."""

from __future__ import annotations

import pytest
from celery.signals import task_prerun
from django.core import mail

from alerts.evaluation import alert_rules_evaluate
from alerts.models import Notification
from portal.services import intake
from tests.alerts.conftest import minutes, now, rule, traffic
from tests.clients import web_client
from tests.portal.intake.launch_fields import complete_fields


@pytest.fixture
def celery_tasks():
    """Names of the Celery tasks that ran (Celery's own signal, fired for eager tasks too)."""
    ran: list[str] = []

    def record(sender=None, **kwargs):
        ran.append(sender.name)

    task_prerun.connect(record, weak=False)
    yield ran
    task_prerun.disconnect(record)


def test_launch_request_submit_emails_after_the_request_from_a_task(
    fleet, people, celery_tasks, django_capture_on_commit_callbacks
):
    draft = intake.launch_request_create(actor=people.requester, **complete_fields(fleet))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        resp = web_client(people.requester).post(f"/launch/{draft.uuid}/submit")
    assert resp.status_code == 302
    # The request has answered: nothing was mailed inside it, no task ran.
    assert mail.outbox == [] and celery_tasks == []
    assert len(callbacks) == 1  # the notification, waiting for the commit
    with django_capture_on_commit_callbacks(execute=True):  # the commit happens
        for cb in callbacks:
            cb()
    # …then inbox rows, and the mail from alerts' email task, after the commit.
    title = f'Launch request "{draft.title}" was submitted for review'
    assert sorted(Notification.objects.values_list("user__username", "title")) == [
        ("acme-req", title),
        ("appr", title),
    ]
    assert celery_tasks == ["alerts.tasks.send_notification_emails", "alerts.tasks.send_notification_emails"]
    assert sorted(tuple(m.to) for m in mail.outbox) == [("acme-req@example.org",), ("appr@example.org",)]
    assert mail.outbox[0].subject == f"[Headroom] {title}"
    assert f"/launch/{draft.uuid}/" in mail.outbox[0].body


def test_an_alert_emails_its_people_once_after_commit(fleet, people, celery_tasks, django_capture_on_commit_callbacks):
    t = now()
    rule(name="acme throttles", scope="tenant", tenant=fleet.acme, threshold=10, channels=["email"])
    traffic(t - minutes(2), admits=10, throttles=5)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        alert_rules_evaluate(now=t)
    assert mail.outbox == [] and celery_tasks == []
    with django_capture_on_commit_callbacks(execute=True):
        for cb in callbacks:
            cb()
    assert celery_tasks == ["alerts.tasks.send_notification_emails"]
    assert [sorted(m.to) for m in mail.outbox] == [["acme-req@example.org", "acme-view@example.org"]]
    # The task claims its rows: running it again (a redelivery) sends nothing more.
    from alerts.tasks import send_notification_emails

    send_notification_emails.delay(list(Notification.objects.values_list("pk", flat=True)))
    assert len(mail.outbox) == 1
    assert Notification.objects.filter(emailed_at__isnull=True).count() == 0


def test_a_rule_without_the_email_channel_sends_no_mail(fleet, people, django_capture_on_commit_callbacks):
    t = now()
    rule(scope="tenant", tenant=fleet.acme, threshold=10, channels=[])
    traffic(t - minutes(2), admits=10, throttles=5)
    with django_capture_on_commit_callbacks(execute=True):
        alert_rules_evaluate(now=t)
    assert mail.outbox == []
    assert Notification.objects.count() == 2
