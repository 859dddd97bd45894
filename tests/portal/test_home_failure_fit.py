"""The operator's pool table says, per pool, whether what is sold still fits after its failure policy."""

import pytest

from entitlements.services import entitlement_grant, reserve_set
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_sold_is_checked_against_each_pools_own_failure_policy(client, fleet):
    # pool-a: 2 + 2 replicas × 70 CU, policy zone, holds a 30 CU reserve: 250 healthy, 140 − 30 = 110 after a zone
    reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=30, note="covers B")
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_a, fleet.acme, "110"))
    # pool-b: policy replica:1 → 3 × 70 = 210 after the loss; 250 sold is 40 short
    fleet.pool_b.failure_policy = "replica:1"
    fleet.pool_b.save()
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_b, fleet.globex, "250"))
    client.force_login(fleet.operator)

    resp = client.get("/")

    rows = {r["slug"]: r for r in resp.context["rows"]}
    keys = ("failure_policy", "failure_deliverable", "failure_fits", "failure_short")
    assert {s: tuple(rows[s][k] for k in keys) for s in rows} == {
        "pool-a": ("zone", "110.0", True, ""),
        "pool-b": ("replica:1", "210.0", False, "40.0"),
    }
    html = resp.content.decode()
    assert "40.0 CU short" in html
    assert html.count("sold fits") == 1
