from portal.models import LaunchRequest
from tests.clients import api_client as _client


def test_file_edit_submit_through_the_api(fleet, people):
    c = _client(people.requester)
    resp = c.post(
        "/api/v1/launch-requests",
        {
            "title": "API launch",
            "model": "llama-test",
            "regions": ["us-test"],
            "committed_value": 10,
            "prompt_p50": 1000,
            "output_p50": 200,
        },
        format="json",
    )
    assert resp.status_code == 201
    body = resp.json()
    assert (body["state"], body["tenant"], body["created_by"]) == ("draft", "acme", "acme-req")
    # Only p50s so far: no spread stated, so the mean is the p50 and 10 × (1,000 + 4 × 200) wt/s = 18 CU at
    # the mean rate. The CU to buy holds the 0.1 % target on 61 of 64 simulated hours (contract §3): 20.2, the
    # 61st smallest of the draws' own least CU (17.6 to 21.6) as plan() finds them one draw at a time; draw 0
    # alone said 18.5 (the one-draw answer this test pinned before at 18.7).
    assert body["scenario_cu"]["committed"] == "20.200"
    assert body["scenario_planning"]["committed"]["replay_one_step_less"]["cu"] == 20.1
    assert [e["transition"] for e in body["events"]] == ["create"]
    uuid = body["uuid"]
    resp = c.post(f"/api/v1/launch-requests/{uuid}/submit", {}, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"]["fields"]["launch_date"] == ["required before submitting"]
    resp = c.patch(f"/api/v1/launch-requests/{uuid}", {"prompt_p50": -3}, format="json")
    assert resp.status_code == 400
    assert list(resp.json()["error"]["fields"]) == ["prompt_p50"]
    resp = c.patch(f"/api/v1/launch-requests/{uuid}", {"expected_value": 11, "regions": ["us-test"]}, format="json")
    assert resp.status_code == 200
    assert LaunchRequest.objects.get(uuid=uuid).expected_value == 11.0


def test_viewer_and_staff_cannot_file(fleet, people):
    for user in (people.viewer, people.approver, people.operator):
        assert _client(user).post("/api/v1/launch-requests", {"title": "x"}, format="json").status_code == 403
    assert LaunchRequest.objects.count() == 0


def test_approver_lists_all_tenants_and_filters(fleet, people, submitted):
    other = _client(people.outsider).post("/api/v1/launch-requests", {"title": "globex draft"}, format="json").json()
    c = _client(people.approver)
    assert {r["uuid"] for r in c.get("/api/v1/launch-requests").json()["results"]} == {
        str(submitted.uuid),
        other["uuid"],
    }
    assert [
        r["uuid"] for r in c.get("/api/v1/launch-requests?state=submitted&tenant=acme&region=us-test").json()["results"]
    ] == [str(submitted.uuid)]
    assert c.get("/api/v1/launch-requests?tenant=globex&state=submitted").json()["results"] == []
