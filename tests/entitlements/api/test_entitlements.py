from datetime import timedelta

import pytest
from django.utils import timezone

from entitlements.models import Entitlement, EntitlementHistory, Project
from entitlements.services import entitlement_grant
from tests.factories import grant_kwargs

URL = "/api/v1/entitlements"


def _grant(fleet, tenant, cu="10", **kw):
    return entitlement_grant(actor=fleet.operator, reason="seed", **grant_kwargs(fleet.pool_a, tenant, cu, **kw))


def _body(**over):
    start = timezone.now() - timedelta(minutes=5)
    body = {
        "tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved", "cu": "100",
        "starts_at": start.isoformat(), "ends_at": (start + timedelta(days=30)).isoformat(),
        "max_prompt_tokens": 8000, "max_output_tokens": 2000, "prompt_p50": 1000, "prompt_p95": 4000,
        "output_p50": 200, "output_p95": 800, "max_concurrency": 64, "ttft_p99_ms": 2000, "tpot_p99_ms": 200,
        "overage": "throttle", "borrowing_limit_cu": "0", "reason": "launch of chat",
    }  # fmt: skip
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize(
    ("who", "visible"), [("member", 1), ("teammate", 1), ("outsider", 1), ("approver", 2), ("operator", 2)]
)
def test_list_shows_own_tenant_or_all_for_staff(client_for, fleet, who, visible):
    _grant(fleet, fleet.acme)
    _grant(fleet, fleet.globex)
    body = client_for(who).get(URL).json()
    assert body["count"] == visible
    if visible == 1:
        expected = "globex" if who == "outsider" else "acme"
        assert [e["tenant"] for e in body["results"]] == [expected]


def test_detail_members_see_own_outsider_gets_404_gateway_403(client_for, fleet):
    e = _grant(fleet, fleet.acme)
    for who in ("member", "teammate", "approver", "operator"):
        response = client_for(who).get(f"{URL}/{e.uuid}")
        assert response.status_code == 200, who
        body = response.json()
        assert (body["id"], body["tenant"], body["cu"], body["version"], body["active"]) == (
            str(e.uuid),
            "acme",
            10.0,
            1,
            True,
        )
    assert client_for("outsider").get(f"{URL}/{e.uuid}").status_code == 404
    assert client_for("gateway").get(f"{URL}/{e.uuid}").status_code == 403
    assert client_for("gateway").get(URL).status_code == 403


def test_filters(client_for, fleet):
    _grant(fleet, fleet.acme)
    _grant(fleet, fleet.globex, traffic_class="best_effort")
    old = _grant(fleet, fleet.globex, start=timezone.now() - timedelta(days=10), days=1)
    client = client_for("operator")

    def uuids(query):
        return {r["id"] for r in client.get(f"{URL}?{query}").json()["results"]}

    assert len(uuids("tenant=globex")) == 2
    assert len(uuids("traffic_class=best_effort")) == 1
    assert uuids("active=false") == {str(old.uuid)}
    assert len(uuids("active=true&tenant=globex")) == 1
    assert len(uuids("model=llama-test&region=us-test")) == 3
    assert uuids("region=elsewhere") == set()
    # A tenant filter cannot widen a member's view.
    assert client_for("member").get(f"{URL}?tenant=globex").json()["count"] == 0


def test_operator_grants_over_the_api(client_for, fleet):
    Project.objects.create(tenant=fleet.acme, slug="chat", name="Chat")
    response = client_for("operator").post(URL, _body(project="chat"), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["tenant"], body["project"], body["pool"], body["cu"], body["version"]) == (
        "acme",
        "chat",
        "pool-a",
        100.0,
        1,
    )
    assert (body["overage"], body["borrowing_limit_cu"], body["rate_wt_per_s"]) == ("throttle", 0.0, 100_000.0)
    assert [(h["op"], h["version"], h["actor"], h["reason"], h["changes"]) for h in body["history"]] == [
        ("insert", 1, "op", "launch of chat", {})
    ]
    assert Entitlement.objects.get(uuid=body["id"]).cu == 100


def test_grant_that_would_oversell_names_the_pool_and_headroom(client_for, fleet):
    _grant(fleet, fleet.globex, cu="200")
    response = client_for("operator").post(URL, _body(cu="80.5", pool="pool-a"), format="json")
    assert response.status_code == 400
    err = response.json()["error"]
    assert list(err["fields"]) == ["cu"]
    assert err["message"].startswith("cu: pool pool-a has 80.000 CU of headroom left in that window")
    assert Entitlement.objects.filter(tenant=fleet.acme).count() == 0


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"cu": "0"}, "cu"),
        ({"cu": "-1"}, "cu"),
        ({"tenant": "nobody"}, "tenant"),
        ({"model": "gpt-9"}, "model"),
        ({"traffic_class": "vip"}, "traffic_class"),
        ({"project": "missing"}, "project"),
        ({"prompt_p50": 5000}, "prompt_p95"),
        ({"ends_at": "2000-01-01T00:00:00Z"}, "ends_at"),
        ({"reason": None}, "reason"),
        ({"region": "elsewhere"}, "region"),
        ({"overage": "explode"}, "overage"),
        ({"max_concurrency": 0}, "max_concurrency"),
    ],
)
def test_grant_bad_input_names_the_field(client_for, fleet, over, field):
    from tests.factories import RegionFactory

    RegionFactory(slug="elsewhere")
    response = client_for("operator").post(URL, _body(**over), format="json")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [field]
    assert Entitlement.objects.count() == 0


@pytest.mark.parametrize("who", ["member", "teammate", "approver", "gateway"])
def test_only_operators_grant(client_for, fleet, who):
    assert client_for(who).post(URL, _body(), format="json").status_code == 403
    assert Entitlement.objects.count() == 0


def test_amend_and_revoke_history_through_the_api(client_for, fleet):
    client = client_for("operator")
    created = client.post(URL, _body(), format="json").json()
    url = f"{URL}/{created['id']}"
    amended = client.patch(url, {"cu": "150", "max_concurrency": 80, "reason": "growth"}, format="json")
    assert amended.status_code == 200
    assert (amended.json()["cu"], amended.json()["version"]) == (150.0, 2)
    revoked = client.delete(url, {"reason": "offboarded"}, format="json")
    assert revoked.status_code == 200
    body = revoked.json()
    assert (body["version"], body["active"]) == (3, False)
    history = [(h["op"], h["version"], h["actor"], h["reason"], sorted(h["changes"])) for h in body["history"]]
    assert history == [
        ("insert", 1, "op", "launch of chat", []),
        ("update", 2, "op", "growth", ["cu", "max_concurrency"]),
        ("update", 3, "op", "offboarded", ["revoked_at"]),
    ]
    change = body["history"][1]["changes"]["max_concurrency"]
    assert change == {"from": 64, "to": 80}
    assert body["history"][2]["changes"]["revoked_at"]["from"] is None
    # Revoked: no further amendment.
    again = client.patch(url, {"cu": "1", "reason": "x"}, format="json")
    assert (again.status_code, list(again.json()["error"]["fields"])) == (400, ["entitlement"])


def test_amend_refuses_oversell_unknown_fields_and_missing_reason(client_for, fleet):
    e = _grant(fleet, fleet.acme, cu="200")
    client = client_for("operator")
    url = f"{URL}/{e.uuid}"
    over = client.patch(url, {"cu": "280.001", "reason": "grow"}, format="json")
    assert over.status_code == 400
    assert "pool pool-a has 280.000 CU of headroom left" in over.json()["error"]["message"]  # itself excluded
    assert list(client.patch(url, {"tenant": "globex", "reason": "x"}, format="json").json()["error"]["fields"]) == [
        "tenant"
    ]
    assert list(client.patch(url, {"cu": "5"}, format="json").json()["error"]["fields"]) == ["reason"]
    assert list(client.patch(url, {"output_p95": 5000, "reason": "x"}, format="json").json()["error"]["fields"]) == [
        "max_output_tokens"
    ]
    e.refresh_from_db()
    assert (e.cu, e.version) == (200, 1)


def test_revoke_by_post_action_needs_a_reason(client_for, fleet):
    e = _grant(fleet, fleet.acme)
    client = client_for("operator")
    missing = client.post(f"{URL}/{e.uuid}/revoke", {}, format="json")
    assert list(missing.json()["error"]["fields"]) == ["reason"]
    done = client.post(f"{URL}/{e.uuid}/revoke", {"reason": "contract ended"}, format="json")
    assert done.status_code == 200
    e.refresh_from_db()
    assert e.revoked_at is not None
    assert EntitlementHistory.objects.filter(entitlement_id=e.pk, reason="contract ended").count() == 1


def test_writes_outsider_404_teammate_403_nothing_changes(client_for, fleet):
    e = _grant(fleet, fleet.acme)
    url = f"{URL}/{e.uuid}"
    outsider = client_for("outsider")
    assert outsider.patch(url, {"cu": "1", "reason": "x"}, format="json").status_code == 404
    assert outsider.delete(url, {"reason": "x"}, format="json").status_code == 404
    assert outsider.post(f"{url}/revoke", {"reason": "x"}, format="json").status_code == 404
    for who in ("member", "teammate", "approver"):
        client = client_for(who)
        assert client.patch(url, {"cu": "1", "reason": "x"}, format="json").status_code == 403, who
        assert client.delete(url, {"reason": "x"}, format="json").status_code == 403, who
    e.refresh_from_db()
    assert (e.cu, e.version, e.revoked_at) == (10, 1, None)
    assert EntitlementHistory.objects.filter(entitlement_id=e.pk).count() == 1


def test_unknown_id_is_404(client_for, fleet):
    assert client_for("operator").get(f"{URL}/00000000-0000-0000-0000-000000000000").status_code == 404
    assert client_for("operator").get(f"{URL}/not-a-uuid").status_code == 404


def test_list_history_in_a_fixed_number_of_queries(client_for, fleet, django_assert_max_num_queries):
    client = client_for("operator")
    _grant(fleet, fleet.acme)
    client.get(URL)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one:
        client.get(URL)
    for _ in range(5):
        _grant(fleet, fleet.globex)
    with django_assert_max_num_queries(len(one)):
        assert client.get(URL).json()["count"] == 6


def test_without_max_concurrency_the_grant_derives_the_cap_for_its_pool(client_for, fleet):
    response = client_for("operator").post(URL, _body(max_concurrency=None, cu="14", pool="pool-a"), format="json")
    assert response.status_code == 201, response.json()
    d = response.json()
    assert d["max_concurrency"] == d["max_concurrency_derivation"]["derived"]
    assert d["max_concurrency_derivation"]["overridden"] is False
    assert d["max_concurrency"] != 64  # not the shared test envelope's hand-set cap


def test_an_envelope_beyond_the_models_context_is_a_400_naming_the_field(client_for, fleet):
    response = client_for("operator").post(URL, _body(max_output_tokens=16384 - 8000 + 1), format="json")
    assert response.status_code == 400
    assert "max_output_tokens" in response.json()["error"]["fields"]
