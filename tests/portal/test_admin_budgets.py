"""The admin shows an entitlement's budgets and request rate (issue 23), read-only like the rest."""

from __future__ import annotations

from entitlements.services import entitlement_grant
from tests import factories as f


def test_the_admin_shows_budgets_and_request_rate(admin_client, fleet):
    ent = entitlement_grant(
        actor=fleet.operator, reason="grant", daily_budget=123_456, budget_unit="tokens", budget_tz="Asia/Tokyo",
        max_rps=7.5, **f.grant_kwargs(fleet.pool_a, fleet.acme, "5"),
    )  # fmt: skip
    html = admin_client.get(f"/admin/entitlements/entitlement/{ent.pk}/change/").content.decode()
    for label, value in [("Daily budget", "123456"), ("Budget unit", "tokens (prompt + output)"),
                         ("Budget tz", "Asia/Tokyo"), ("Max rps", "7.5"), ("Burst", "8")]:  # fmt: skip
        assert label in html and value in html, label
    assert 'name="daily_budget"' not in html  # read-only, as every entitlement field
