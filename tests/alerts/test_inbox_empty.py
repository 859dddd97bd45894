"""An empty inbox says why (issue 28.8): no rule tells this person, or the rules that do have not held."""

from __future__ import annotations

from tests.alerts.conftest import rule


def _empty_line(client, user) -> str:
    client.force_login(user)
    resp = client.get("/alerts/")
    assert resp.status_code == 200
    html = resp.content.decode()
    start = html.index('id="inbox-empty">')
    return html[start : html.index("</td>", start)]


def test_with_no_rule_for_them_the_inbox_says_so(client, fleet, people):
    rule(name="acme throttles", scope="tenant", tenant=fleet.acme, channels=[])  # tells acme, not the staff
    assert "no alert rule sends its alerts to you" in _empty_line(client, people.approver)
    assert "1 rule watches for you and none has held" in _empty_line(client, people.viewer)


def test_counts_only_enabled_rules_that_reach_the_person(client, fleet, people):
    rule(name="platform throttles", scope="platform", channels=[])
    rule(name="order-by", scope="platform", kind="supply_gap_order_by_within", threshold=14, channels=[])
    rule(name="off", scope="platform", enabled=False, channels=[])
    assert "2 rules watch for you and none has held" in _empty_line(client, people.operator)
    assert "no alert rule sends its alerts to you" in _empty_line(client, people.viewer)
