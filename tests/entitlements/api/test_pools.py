from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from entitlements.models import FailoverReserve, Pool, Zone
from entitlements.services import entitlement_grant
from tests.factories import RegionFactory, grant_kwargs, make_pool


def _grant(fleet, cu, pool=None, tenant=None):
    return entitlement_grant(
        actor=fleet.operator, reason="t", **grant_kwargs(pool or fleet.pool_a, tenant or fleet.acme, cu)
    )


@pytest.mark.parametrize("who", ["approver", "operator"])
def test_staff_read_pool_totals_exactly(client_for, fleet, who):
    _grant(fleet, "200")
    _grant(fleet, "50", tenant=fleet.globex, pool=fleet.pool_b)
    body = client_for(who).get("/api/v1/pools").json()
    assert body["count"] == 2
    a = body["results"][0]
    assert (a["slug"], a["model"], a["region"], a["accelerator"]) == ("pool-a", "llama-test", "us-test", "h100-test")
    assert a["zones"] == [{"zone": "us-test-a", "replicas": 2}, {"zone": "us-test-b", "replicas": 2}]
    assert (a["cu_per_replica"], a["physical_cu"], a["deliverable_cu"]) == (70.0, 280.0, 280.0)
    assert (a["sold_cu"], a["headroom_cu"]) == (200.0, 80.0)
    assert a["breakdown"] == {
        "physical": 280.0, "failover_reserve": 0.0, "maintenance": 0.0, "safety": 0.0, "fragmentation": 0.0,
        "deliverable": 280.0,
    }  # fmt: skip
    assert a["reserves"] == {"held": [], "protecting_this": []}
    assert (body["results"][1]["sold_cu"], body["results"][1]["headroom_cu"]) == (50.0, 230.0)


@pytest.mark.parametrize("who", ["member", "teammate", "outsider", "gateway"])
def test_tenants_and_gateways_cannot_see_pools(client_for, fleet, who):
    client = client_for(who)
    assert client.get("/api/v1/pools").status_code == 403
    assert client.get("/api/v1/pools/pool-a").status_code == 403


def test_pool_detail_by_slug_and_unknown_slug(client_for, fleet):
    client = client_for("approver")
    assert client.get("/api/v1/pools/pool-b").json()["physical_cu"] == 280.0
    assert client.get("/api/v1/pools/nope").status_code == 404


def test_pool_list_queries_do_not_grow_with_pools(client_for, fleet, django_assert_max_num_queries):
    client = client_for("operator")
    FailoverReserve.objects.create(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=10)
    client.get("/api/v1/pools")  # warm the role cache on the user object
    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/pools")
    for i in range(4):
        make_pool(f"pool-x{i}", region=RegionFactory(slug=f"r{i}"))
    with django_assert_max_num_queries(len(few)):
        assert client.get("/api/v1/pools").json()["count"] == 6


def test_operator_patch_changes_deliverable(client_for, fleet):
    _grant(fleet, "200")
    response = client_for("operator").patch(
        "/api/v1/pools/pool-a", {"maintenance_pct": 10, "failure_policy": "replica:1"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    # 280 − 10 % maintenance = 252
    assert (body["deliverable_cu"], body["headroom_cu"], body["failure_policy"]) == (252.0, 52.0, "replica:1")
    assert body["breakdown"]["maintenance"] == 28.0


def test_patch_that_would_strand_sold_capacity_is_refused_naming_the_field(client_for, fleet):
    _grant(fleet, "200")
    response = client_for("operator").patch("/api/v1/pools/pool-a", {"safety_pct": 30}, format="json")
    assert response.status_code == 400
    err = response.json()["error"]
    assert list(err["fields"]) == ["safety_pct"]
    assert err["fields"]["safety_pct"] == [
        "pool pool-a would deliver 196.000 CU but has sold 200.000 CU from now on (4.000 CU short)"
    ]
    fleet.pool_a.refresh_from_db()
    assert fleet.pool_a.safety_pct == 0


def test_patch_zone_replicas(client_for, fleet):
    client = client_for("operator")
    response = client.patch("/api/v1/pools/pool-a", {"zones": [{"zone": "us-test-a", "replicas": 1}]}, format="json")
    assert response.status_code == 200
    assert response.json()["physical_cu"] == 210.0
    fleet.pool_a.refresh_from_db()
    assert fleet.pool_a.physical_cu == Decimal("210.000")
    _grant(fleet, "200")
    refused = client.patch("/api/v1/pools/pool-a", {"zones": [{"zone": "us-test-b", "replicas": 0}]}, format="json")
    assert refused.status_code == 400
    assert list(refused.json()["error"]["fields"]) == ["zones"]
    assert fleet.pool_a.zones.get(zone__slug="us-test-b").replicas == 2


def test_patch_bad_input_names_the_field(client_for, fleet):
    client = client_for("operator")
    Zone.objects.create(slug="eu-1", region=RegionFactory(slug="eu"))
    cases = [
        ({"failure_policy": "sometimes"}, "failure_policy"),
        ({"maintenance_pct": 101}, "maintenance_pct"),
        ({"zones": [{"zone": "eu-1", "replicas": 3}]}, "zones"),
        ({"slug": "renamed"}, "slug"),
    ]
    for body, field in cases:
        response = client.patch("/api/v1/pools/pool-a", body, format="json")
        assert response.status_code == 400, body
        assert list(response.json()["error"]["fields"]) == [field], body
    assert Pool.objects.get(pk=fleet.pool_a.pk).maintenance_pct == 0


def test_approver_cannot_write(client_for, fleet):
    client = client_for("approver")
    assert client.patch("/api/v1/pools/pool-a", {"maintenance_pct": 10}, format="json").status_code == 403
    response = client.post("/api/v1/pools/pool-a/reserves", {"protected_pool": "pool-b", "cu": "10"}, format="json")
    assert response.status_code == 403
    assert FailoverReserve.objects.count() == 0
    assert Pool.objects.get(pk=fleet.pool_a.pk).maintenance_pct == 0


def test_reserves_set_resize_and_remove(client_for, fleet):
    client = client_for("operator")
    body = client.post("/api/v1/pools/pool-a/reserves", {"protected_pool": "pool-b", "cu": "40"}, format="json").json()
    res = FailoverReserve.objects.get()
    assert body["reserves"]["held"] == [
        {"id": res.pk, "host_pool": "pool-a", "protects": {"pool": "pool-b"}, "cu": 40.0}
    ]
    assert (body["breakdown"]["failover_reserve"], body["deliverable_cu"]) == (40.0, 240.0)
    b = client.get("/api/v1/pools/pool-b").json()
    assert b["reserves"] == {
        "held": [],
        "protecting_this": [{"id": res.pk, "host_pool": "pool-a", "protects": {"pool": "pool-b"}, "cu": 40.0}],
    }
    assert b["deliverable_cu"] == 280.0  # counted once, in its host
    resized = client.post("/api/v1/pools/pool-a/reserves", {"protected_pool": "pool-b", "cu": "60"}, format="json")
    assert resized.json()["deliverable_cu"] == 220.0
    removed = client.post("/api/v1/pools/pool-a/reserves", {"protected_pool": "pool-b", "cu": "0"}, format="json")
    assert (removed.json()["deliverable_cu"], removed.json()["reserves"]["held"]) == (280.0, [])
    assert FailoverReserve.objects.count() == 0


def test_zone_reserve_names_its_pool_and_is_listed_once(client_for, fleet):
    make_pool("pool-c", op=fleet.pool_a.operating_point)  # a third llama-test pool with replicas in us-test-a
    client = client_for("operator")
    # Two other pools have replicas in us-test-a: a zone alone does not say which one.
    ambiguous = client.post("/api/v1/pools/pool-b/reserves", {"protected_zone": "us-test-a", "cu": "70"}, format="json")
    assert (ambiguous.status_code, list(ambiguous.json()["error"]["fields"])) == (400, ["protected_pool"])
    body = {"protected_pool": "pool-a", "protected_zone": "us-test-a", "cu": "70"}
    response = client.post("/api/v1/pools/pool-b/reserves", body, format="json")
    assert response.status_code == 200
    res = FailoverReserve.objects.get()
    entry = {"id": res.pk, "host_pool": "pool-b", "protects": {"pool": "pool-a", "zone": "us-test-a"}, "cu": 70.0}
    assert response.json()["reserves"] == {"held": [entry], "protecting_this": []}
    listed = [r["reserves"]["protecting_this"] for r in client.get("/api/v1/pools").json()["results"]]
    assert listed == [[entry], [], []]  # pool-a, pool-b, pool-c: once, under the pool it stands for


def test_a_reserve_for_a_pool_of_another_model_is_a_400_naming_the_field(client_for, fleet):
    from tests.factories import OperatingPointFactory, ServedModelFactory

    other = OperatingPointFactory(model=ServedModelFactory(slug="other-model"))
    make_pool("pool-other", op=other, region=fleet.pool_a.region)
    client = client_for("operator")
    for body in ({"protected_pool": "pool-a"}, {"protected_pool": "pool-a", "protected_zone": "us-test-a"}):
        response = client.post("/api/v1/pools/pool-other/reserves", {**body, "cu": "10"}, format="json")
        assert response.status_code == 400
        assert list(response.json()["error"]["fields"]) == ["protected_pool"]
        assert "serves llama-test" in response.json()["error"]["message"]
    # A zone alone finds no pool of other-model there.
    alone = client.post("/api/v1/pools/pool-other/reserves", {"protected_zone": "us-test-a", "cu": "10"}, format="json")
    assert (alone.status_code, list(alone.json()["error"]["fields"])) == (400, ["protected_pool"])
    assert FailoverReserve.objects.count() == 0


def test_a_zone_reserve_counts_only_host_replicas_outside_that_zone(client_for, fleet):
    client = client_for("operator")
    # pool-a: 2 replicas in us-test-a and 2 in us-test-b at 70 CU: 140 CU survive losing us-test-a.
    body = {"protected_pool": "pool-b", "protected_zone": "us-test-a"}
    over = client.post("/api/v1/pools/pool-a/reserves", {**body, "cu": "140.001"}, format="json")
    assert over.status_code == 400
    assert over.json()["error"]["message"] == (
        "cu: pool pool-a has 140.000 CU on replicas outside zone us-test-a; reserves for that zone "
        "would need 140.001 CU (its replicas in the zone fail with it)"
    )
    assert client.post("/api/v1/pools/pool-a/reserves", {**body, "cu": "140"}, format="json").status_code == 200
    # Fewer replicas outside the zone can no longer hold it.
    shrink = client.patch("/api/v1/pools/pool-a", {"zones": [{"zone": "us-test-b", "replicas": 1}]}, format="json")
    assert (shrink.status_code, list(shrink.json()["error"]["fields"])) == (400, ["zones"])
    assert Pool.objects.get(slug="pool-a").zones.get(zone__slug="us-test-b").replicas == 2
    # More replicas inside the protected zone do not help either.
    grow = client.patch("/api/v1/pools/pool-a", {"zones": [{"zone": "us-test-a", "replicas": 4}]}, format="json")
    assert grow.status_code == 200
    again = client.post("/api/v1/pools/pool-a/reserves", {**body, "cu": "140.001"}, format="json")
    assert again.status_code == 400


def test_reserve_that_would_oversell_the_host_is_refused(client_for, fleet):
    _grant(fleet, "200")
    client = client_for("operator")
    response = client.post("/api/v1/pools/pool-a/reserves", {"protected_pool": "pool-b", "cu": "81"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("cu: pool pool-a has sold 200.000 CU")
    neither = client.post("/api/v1/pools/pool-a/reserves", {"cu": "1"}, format="json")
    assert list(neither.json()["error"]["fields"]) == ["protected_pool"]
    assert FailoverReserve.objects.count() == 0


# docs/contract.md §5: one scope, one pool; only best_effort borrows -------------------------------------


def _entitlement_body(**over):
    body = {
        "tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved", "cu": "10",
        "starts_at": "2026-01-01T00:00:00Z", "max_prompt_tokens": 8000, "max_output_tokens": 2000,
        "prompt_p50": 1000, "prompt_p95": 4000, "output_p50": 200, "output_p95": 800, "max_concurrency": 64,
        "ttft_p99_ms": 2000, "tpot_p99_ms": 200, "reason": "launch",
    }  # fmt: skip
    return {**body, **over}


@pytest.mark.parametrize("cls", ["reserved", "shared"])
def test_api_borrowing_limit_on_a_guaranteed_class_is_a_400_naming_it(client_for, fleet, cls):
    body = _entitlement_body(traffic_class=cls, overage="borrow", borrowing_limit_cu="5")
    response = client_for("operator").post("/api/v1/entitlements", body, format="json")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["borrowing_limit_cu"]


def test_api_grant_outside_the_scopes_pool_is_a_409_naming_it(client_for, fleet):
    _grant(fleet, "275")
    client = client_for("operator")
    response = client.post("/api/v1/entitlements", _entitlement_body(pool="pool-b"), format="json")
    assert response.status_code == 409
    err = response.json()["error"]
    assert (err["code"], list(err["fields"])) == ("conflict", ["pool"])
    assert "lives in pool pool-a, not pool-b" in err["message"]
    full = client.post("/api/v1/entitlements", _entitlement_body(), format="json")  # 5 CU left in pool-a
    assert full.status_code == 409
    assert full.json()["error"]["message"].startswith("cu: pool pool-a has 5.000 CU of headroom left")


def test_api_move_scope(client_for, fleet):
    first, second = _grant(fleet, "100"), _grant(fleet, "20")
    body = {"tenant": "acme", "traffic_class": "reserved", "reason": "drain pool-a"}
    assert client_for("approver").post("/api/v1/pools/pool-b/move-scope", body, format="json").status_code == 403
    response = client_for("operator").post("/api/v1/pools/pool-b/move-scope", body, format="json")
    assert response.status_code == 200
    assert response.json() == {"pool": "pool-b", "moved": [str(first.uuid), str(second.uuid)]}
    assert set(Pool.objects.get(slug="pool-b").entitlements.values_list("pk", flat=True)) == {first.pk, second.pk}


def test_api_move_scope_that_does_not_fit_is_a_409_and_bad_input_a_400(client_for, fleet):
    _grant(fleet, "100")
    _grant(fleet, "200", pool=fleet.pool_b, tenant=fleet.globex)
    client = client_for("operator")
    body = {"tenant": "acme", "traffic_class": "reserved", "reason": "t"}
    response = client.post("/api/v1/pools/pool-b/move-scope", body, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["message"].startswith("pool: pool pool-b delivers 280.000 CU")
    bad = client.post("/api/v1/pools/pool-b/move-scope", {**body, "project": "nope"}, format="json")
    assert (bad.status_code, list(bad.json()["error"]["fields"])) == (400, ["project"])
    assert Pool.objects.get(slug="pool-a").entitlements.count() == 1
