"""Signed webhooks against a real local HTTP server: the signature verifies, a 500 is retried with
exponential backoff, a 200 stops it, and the delivery log shows every attempt with its status code."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import WebhookDelivery, WebhookEndpoint
from alerts.signing import HEADER, signature, verify
from alerts.webhooks import due_deliveries, webhook_delivery_attempt, webhook_event_enqueue
from tests.alerts import receiver


@pytest.fixture
def hook_server():
    servers = []

    def make(codes):
        rec = receiver.start(codes)
        servers.append(rec)
        return rec

    yield make
    for rec in servers:
        rec.server.shutdown()
        rec.server.server_close()


@pytest.fixture(autouse=True)
def _webhook_settings(settings):
    settings.ALERTS_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on 127.0.0.1
    settings.ALERTS_WEBHOOK_BACKOFF_BASE_S = 30
    settings.ALERTS_WEBHOOK_MAX_ATTEMPTS = 4


def _due(now):
    """What the beat task does, at a chosen time."""
    return [webhook_delivery_attempt(delivery_id=pk, now=now) for pk in due_deliveries(now=now)]


def _log(endpoint):
    rows = WebhookDelivery.objects.filter(endpoint=endpoint).order_by("attempt")
    return [(d.attempt, d.status, d.status_code) for d in rows]


def test_500_is_retried_with_backoff_and_200_stops_it(fleet, hook_server, django_capture_on_commit_callbacks):
    rec = hook_server([500, 500, 200])
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="acme pager", url=rec.url)
    with django_capture_on_commit_callbacks(execute=True):  # first attempt right after commit
        webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={"summary": "acme is throttled"})
    assert len(rec.received) == 1
    first = WebhookDelivery.objects.get(endpoint=ep, attempt=1)
    t1 = first.attempted_at
    second = WebhookDelivery.objects.get(endpoint=ep, attempt=2)
    assert second.next_attempt_at - t1 == timedelta(seconds=30)

    assert _due(t1 + timedelta(seconds=29)) == []  # backing off: nothing sent early
    assert len(rec.received) == 1
    assert _due(t1 + timedelta(seconds=30)) == ["retried"]
    assert len(rec.received) == 2
    t2 = t1 + timedelta(seconds=30)
    third = WebhookDelivery.objects.get(endpoint=ep, attempt=3)
    assert third.next_attempt_at - t2 == timedelta(seconds=60)  # doubled

    assert _due(t2 + timedelta(seconds=59)) == []
    assert _due(t2 + timedelta(seconds=60)) == ["delivered"]
    assert _due(t2 + timedelta(days=1)) == []  # a 200 stops it
    assert len(rec.received) == 3

    assert _log(ep) == [(1, "retried", 500), (2, "retried", 500), (3, "delivered", 200)]
    assert WebhookDelivery.objects.get(endpoint=ep, attempt=3).delivered_at == t2 + timedelta(seconds=60)

    # Every attempt carries the same event, signed with the endpoint's secret over "<ts>.<body>".
    bodies = [json.loads(r.body) for r in rec.received]
    assert {b["id"] for b in bodies} == {str(first.event_id)}
    assert bodies[0]["type"] == "alert.opened" and bodies[0]["data"] == {"summary": "acme is throttled"}
    for r in rec.received:
        assert r.path == "/hook"
        assert verify(ep.secret, r.headers[HEADER], r.body)
        assert not verify("another secret", r.headers[HEADER], r.body)
        assert not verify(ep.secret, r.headers[HEADER], r.body + b" ")
    assert [r.headers["X-Headroom-Delivery-Attempt"] for r in rec.received] == ["1", "2", "3"]


def test_attempts_are_bounded_then_marked_failed(fleet, hook_server, django_capture_on_commit_callbacks):
    rec = hook_server([500] * 10)
    ep = WebhookEndpoint.objects.create(tenant=None, name="ops", url=rec.url)
    with django_capture_on_commit_callbacks(execute=True):
        webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={})
    far = timezone.now() + timedelta(days=1)
    for _ in range(6):
        _due(far)
        far += timedelta(days=1)
    assert len(rec.received) == 4
    assert _log(ep) == [(1, "retried", 500), (2, "retried", 500), (3, "retried", 500), (4, "failed", 500)]


def test_a_refused_connection_is_logged_and_retried(fleet, hook_server, django_capture_on_commit_callbacks):
    rec = hook_server([])
    url = rec.url
    rec.server.shutdown()
    rec.server.server_close()  # nothing listens there any more
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="gone", url=url)
    with django_capture_on_commit_callbacks(execute=True):
        webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={})
    d = WebhookDelivery.objects.get(endpoint=ep, attempt=1)
    assert (d.status, d.status_code) == ("retried", None)
    assert d.error == "failed: no answer"  # not "Connection refused": the tenant's log is no port scanner


def test_tenant_endpoints_may_not_call_private_addresses(
    fleet, hook_server, settings, django_capture_on_commit_callbacks
):
    settings.ALERTS_WEBHOOK_ALLOW_PRIVATE = False
    rec = hook_server([200])
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="internal", url=rec.url)
    with django_capture_on_commit_callbacks(execute=True):
        webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={})
    assert rec.received == []
    d = WebhookDelivery.objects.get(endpoint=ep, attempt=1)
    # Failed at once with the reason: no retry can pass the guard (it was retried to the attempt limit).
    assert d.status == "failed" and d.error == "refused: the URL is not a public http(s) address"
    far = timezone.now() + timedelta(days=1)
    assert _due(far) == []
    assert _log(ep) == [(1, "failed", None)]


def test_a_redelivered_attempt_sends_nothing_twice(fleet, hook_server, django_capture_on_commit_callbacks):
    rec = hook_server([200])
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="acme", url=rec.url)
    with django_capture_on_commit_callbacks(execute=True):
        (d,) = webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={})
    assert webhook_delivery_attempt(delivery_id=d.pk) == "skipped"
    assert len(rec.received) == 1


def test_signature_format_and_tolerance():
    body = b'{"a":1}'
    header = signature("s3cret", 1_700_000_000, body)
    assert header == "t=1700000000,v1=" + __import__("hmac").new(b"s3cret", b"1700000000." + body, "sha256").hexdigest()
    assert verify("s3cret", header, body, now=1_700_000_100)
    assert not verify("s3cret", header, body, now=1_700_000_000 + 301)  # a replay after the tolerance
    assert not verify("s3cret", "garbage", body)
