"""`/api/v1/alerts` and `/api/v1/webhooks`: staff read all, a tenant reads its own, another tenant's object is a 404."""

from __future__ import annotations

from alerts.models import AlertEpisode, WebhookDelivery, WebhookEndpoint
from tests.alerts.conftest import now, rule
from tests.clients import api_client
from tests.factories import platform_user


def _world(fleet):
    acme = rule(scope="tenant", tenant=fleet.acme, name="acme rule")
    globex = rule(scope="tenant", tenant=fleet.globex, name="globex rule")
    platform = rule(scope="platform", name="platform rule", kind="forecast_run_failed", threshold=0)
    AlertEpisode.objects.create(rule=acme, subject_key="tenant:acme", summary="acme throttled", opened_at=now())
    hook = WebhookEndpoint.objects.create(tenant=fleet.acme, name="acme hook", url="https://h.example.org/a")
    ops = WebhookEndpoint.objects.create(tenant=None, name="ops hook", url="https://h.example.org/ops")
    WebhookDelivery.objects.create(
        endpoint=hook,
        event_id="00000000-0000-0000-0000-000000000001",
        event_type="ping",
        payload={},
        next_attempt_at=now(),
        status="delivered",
        status_code=200,
    )
    return acme, globex, platform, hook, ops


def test_members_read_their_own_rules_and_endpoints(fleet, people):
    acme, globex, platform, hook, ops = _world(fleet)
    c = api_client(people.viewer)
    assert [r["name"] for r in c.get("/api/v1/alerts").json()] == ["acme rule"]
    body = c.get(f"/api/v1/alerts/{acme.uuid}").json()
    assert body["tenant"] == "acme" and [e["summary"] for e in body["episodes"]] == ["acme throttled"]
    assert [e["name"] for e in c.get("/api/v1/webhooks").json()] == ["acme hook"]
    detail = c.get(f"/api/v1/webhooks/{hook.uuid}").json()
    assert [(d["event_type"], d["status_code"]) for d in detail["deliveries"]] == [("ping", 200)]
    assert "secret" not in detail


def test_outsider_gets_404_for_another_tenants_objects(fleet, people):
    acme, globex, platform, hook, ops = _world(fleet)
    c = api_client(people.outsider)
    assert [r["name"] for r in c.get("/api/v1/alerts").json()] == ["globex rule"]
    assert c.get(f"/api/v1/alerts/{acme.uuid}").status_code == 404
    assert c.get(f"/api/v1/alerts/{platform.uuid}").status_code == 404
    assert c.get(f"/api/v1/webhooks/{hook.uuid}").status_code == 404
    assert c.get(f"/api/v1/webhooks/{ops.uuid}").status_code == 404
    assert c.get("/api/v1/webhooks").json() == []


def test_staff_read_everything_and_gateways_nothing(fleet, people):
    _world(fleet)
    for person in (people.approver, people.operator):
        c = api_client(person)
        assert sorted(r["name"] for r in c.get("/api/v1/alerts").json()) == [
            "acme rule",
            "globex rule",
            "platform rule",
        ]
        assert sorted(e["name"] for e in c.get("/api/v1/webhooks").json()) == ["acme hook", "ops hook"]
    gw = api_client(platform_user("gw", "gateway"))
    assert gw.get("/api/v1/alerts").status_code == 403
    assert gw.get("/api/v1/webhooks").status_code == 403
