"""Webhook fan-out: a tenant's alerts and launch requests reach that tenant's endpoints only; pool
and platform alerts reach the operators' endpoints; an episode that resolves sends `alert.resolved`
to machines but pages no person."""

from __future__ import annotations

from alerts.evaluation import alert_rules_evaluate
from alerts.models import Notification, WebhookDelivery, WebhookEndpoint
from portal.services import intake
from tests.alerts.conftest import minutes, now, rule, traffic
from tests.portal.intake.launch_fields import complete_fields


def _endpoints(fleet):
    acme = WebhookEndpoint.objects.create(tenant=fleet.acme, name="acme", url="https://h.example.org/acme")
    globex = WebhookEndpoint.objects.create(tenant=fleet.globex, name="globex", url="https://h.example.org/globex")
    ops = WebhookEndpoint.objects.create(tenant=None, name="ops", url="https://h.example.org/ops")
    off = WebhookEndpoint.objects.create(tenant=fleet.acme, name="off", url="https://h.example.org/off", enabled=False)
    return acme, globex, ops, off


def _events():
    return sorted(WebhookDelivery.objects.values_list("endpoint__name", "event_type"))


def test_tenant_alert_opens_and_resolves_on_the_tenants_endpoints(fleet, people):
    _endpoints(fleet)
    t = now()
    rule(name="acme", scope="tenant", tenant=fleet.acme, threshold=10, channels=["webhook"])
    traffic(t - minutes(20), admits=10, throttles=5)
    alert_rules_evaluate(now=t - minutes(15))
    assert _events() == [("acme", "alert.opened")]
    alert_rules_evaluate(now=t)  # the throttles left the window
    assert _events() == [("acme", "alert.opened"), ("acme", "alert.resolved")]
    assert Notification.objects.filter(user=people.viewer).count() == 1  # resolved pages nobody
    opened = WebhookDelivery.objects.get(event_type="alert.opened").payload
    assert opened["data"]["rule"]["scope"] == "tenant"
    assert opened["data"]["episode"]["subject"] == "tenant:acme"


def test_platform_alert_goes_to_the_operators_endpoints(fleet, people):
    _endpoints(fleet)
    t = now()
    rule(name="all", scope="platform", threshold=10, channels=["webhook"])
    traffic(t - minutes(2), admits=10, throttles=5)
    alert_rules_evaluate(now=t)
    assert _events() == [("ops", "alert.opened")]


def test_launch_request_steps_reach_the_tenants_endpoints(fleet, people, django_capture_on_commit_callbacks):
    _endpoints(fleet)
    draft = intake.launch_request_create(actor=people.requester, **complete_fields(fleet))
    with django_capture_on_commit_callbacks() as submitted:
        intake.launch_request_submit(actor=people.requester, request=draft)
    with django_capture_on_commit_callbacks() as sends:  # the commit: notify runs, sending waits
        for cb in submitted:
            cb()
    assert len(sends) == 3  # requester's email, approvers' email, the webhook's first attempt
    assert _events() == [("acme", "launch_request.submit")]
    data = WebhookDelivery.objects.get().payload["data"]
    assert (data["launch_request"], data["to_state"], data["actor"]) == (str(draft.uuid), "submitted", "acme-req")
