"""Inbox, rules and webhook pages: what each person sees and may change; bad input is a 400 naming the field."""

from __future__ import annotations

from alerts.dispatch import Message, message_deliver
from alerts.models import AlertRule, Notification, WebhookDelivery, WebhookEndpoint
from tests.alerts.conftest import rule
from tests.clients import web_client


def _note(user, title="acme is throttled"):
    (n,) = message_deliver(message=Message(kind="alert.opened", title=title), people=[user], email=False)
    return n


def test_inbox_lists_my_notifications_and_marks_them_read(fleet, people):
    mine = _note(people.viewer, "mine")
    _note(people.requester, "my teammate's")
    c = web_client(people.viewer)
    page = c.get("/alerts/").content.decode()
    assert "mine" in page and "my teammate&#x27;s" not in page
    assert '<mark id="nav-unread">1</mark>' in page
    assert c.post(f"/alerts/{mine.uuid}/read").status_code == 302
    mine.refresh_from_db()
    assert mine.read_at is not None
    assert 'id="nav-unread"' not in c.get("/alerts/").content.decode()


def test_someone_elses_notification_is_a_404_and_stays_unread(fleet, people):
    theirs = _note(people.requester)
    for person in (people.viewer, people.outsider, people.operator):
        assert web_client(person).post(f"/alerts/{theirs.uuid}/read").status_code == 404
    theirs.refresh_from_db()
    assert theirs.read_at is None


def test_mark_all_read_touches_only_mine(fleet, people):
    _note(people.viewer, "a")
    _note(people.viewer, "b")
    other = _note(people.requester, "c")
    assert web_client(people.viewer).post("/alerts/read-all").status_code == 302
    assert Notification.objects.filter(user=people.viewer, read_at__isnull=True).count() == 0
    other.refresh_from_db()
    assert other.read_at is None


def test_requester_adds_a_rule_for_their_own_tenant_only(fleet, people):
    c = web_client(people.requester)
    resp = c.post(
        "/alerts/rules/",
        {
            "name": "quota",
            "kind": "use_over_bought",
            "threshold": "80",
            "window_minutes": "10",
            "channels": ["email"],
            "scope": "platform",
            "tenant": "globex",
        },  # ignored: a member's rules are their tenant's
    )
    assert resp.status_code == 302
    r = AlertRule.objects.get(name="quota")
    assert (r.scope, r.tenant, r.pool, r.threshold, r.window_minutes, r.channels) == (
        "tenant",
        fleet.acme,
        None,
        80.0,
        10,
        ["email"],
    )
    assert r.created_by == people.requester


def test_bad_rule_input_is_a_400_naming_the_field(fleet, people):
    c = web_client(people.requester)
    resp = c.post("/alerts/rules/", {"name": "x", "kind": "use_over_bought", "threshold": "-5", "window_minutes": "10"})
    assert resp.status_code == 400
    assert "threshold" in resp.context["form"].errors
    resp = c.post("/alerts/rules/", {"name": "x", "kind": "forecast_run_failed", "window_minutes": "10"})
    assert resp.status_code == 400 and "kind" in resp.context["form"].errors  # not offered to tenants
    resp = web_client(people.operator).post(
        "/alerts/rules/", {"name": "x", "kind": "supply_gap_order_by_within", "scope": "pool", "window_minutes": "10"}
    )
    assert resp.status_code == 400 and resp.context["form"].errors["pool"] == ["choose the pool this rule watches"]
    assert AlertRule.objects.count() == 0


def test_viewers_and_approvers_may_not_add_rules(fleet, people):
    body = {"name": "x", "kind": "use_over_bought", "window_minutes": "10"}
    assert web_client(people.viewer).post("/alerts/rules/", body).status_code == 403
    assert web_client(people.approver).post("/alerts/rules/", body).status_code == 403
    assert AlertRule.objects.count() == 0


def test_operator_adds_a_pool_rule(fleet, people):
    resp = web_client(people.operator).post(
        "/alerts/rules/",
        {
            "name": "order soon",
            "kind": "supply_gap_order_by_within",
            "scope": "pool",
            "pool": "pool-a",
            "window_minutes": "15",
        },
    )
    assert resp.status_code == 302
    r = AlertRule.objects.get()
    assert (r.scope, r.pool, r.tenant, r.threshold) == ("pool", fleet.pool_a, None, 14.0)  # the kind's default


def test_rules_are_tenant_isolated(fleet, people):
    acme_rule = rule(scope="tenant", tenant=fleet.acme, name="acme-only-rule")
    assert "acme-only-rule" not in web_client(people.outsider).get("/alerts/rules/").content.decode()
    assert "acme-only-rule" in web_client(people.viewer).get("/alerts/rules/").content.decode()
    assert web_client(people.outsider).post(f"/alerts/rules/{acme_rule.uuid}/toggle").status_code == 404
    assert web_client(people.viewer).post(f"/alerts/rules/{acme_rule.uuid}/toggle").status_code == 403
    acme_rule.refresh_from_db()
    assert acme_rule.enabled is True
    assert web_client(people.requester).post(f"/alerts/rules/{acme_rule.uuid}/toggle").status_code == 302
    acme_rule.refresh_from_db()
    assert acme_rule.enabled is False


def test_webhook_endpoint_create_detail_and_test_fire(fleet, people, django_capture_on_commit_callbacks):
    c = web_client(people.requester)
    assert c.post("/alerts/webhooks/", {"name": "hook", "url": "ftp://example.org/x"}).status_code == 400
    resp = c.post("/alerts/webhooks/", {"name": "hook", "url": "https://hooks.example.org/acme"})
    ep = WebhookEndpoint.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/alerts/webhooks/{ep.uuid}/"
    assert ep.tenant == fleet.acme and len(ep.secret) == 64
    # test-fire: one signed ping, queued for after the commit (not sent inside the request)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert c.post(f"/alerts/webhooks/{ep.uuid}/test").status_code == 302
    assert len(callbacks) == 1
    d = WebhookDelivery.objects.get()
    assert (d.event_type, d.attempt, d.status) == ("ping", 1, "pending")
    page = c.get(f"/alerts/webhooks/{ep.uuid}/").content.decode()
    assert ep.secret in page and "ping" in page
    # a viewer sees the log, not the secret, and may not fire
    viewer = web_client(people.viewer)
    assert ep.secret not in viewer.get(f"/alerts/webhooks/{ep.uuid}/").content.decode()
    assert viewer.post(f"/alerts/webhooks/{ep.uuid}/test").status_code == 403
    # the outsider learns nothing
    out = web_client(people.outsider)
    assert out.get(f"/alerts/webhooks/{ep.uuid}/").status_code == 404
    assert out.post(f"/alerts/webhooks/{ep.uuid}/test").status_code == 404
    assert "hooks.example.org" not in out.get("/alerts/webhooks/").content.decode()
    assert WebhookDelivery.objects.count() == 1
