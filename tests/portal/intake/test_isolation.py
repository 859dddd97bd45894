"""Another tenant's member reaches nothing of a request: every page, partial and API route is a
404, nothing changes, and the API list does not show it."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from entitlements.models import Entitlement
from portal.models import LaunchRequest, LaunchRequestEvent

PAGES_GET = ["", "edit", "activity"]
PAGES_POST = ["autosave", "sizing", "submit", "withdraw", "approve", "partially-approve", "reject", "return"]
API_POST = ["submit", "approve", "partially-approve", "reject", "return", "withdraw"]
FORM = {"title": "hijacked", "comment": "x", "cu_us-test": "1", "committed_value": "1"}


def _fingerprint():
    return (
        list(LaunchRequest.objects.values_list("uuid", "state", "title", "committed_value", "updated_at")),
        LaunchRequestEvent.objects.count(),
        Entitlement.objects.count(),
    )


@pytest.mark.parametrize("state", ["draft", "submitted"])
def test_outsider_gets_404_everywhere_and_nothing_changes(state, request, people):
    req = request.getfixturevalue(state)
    before = _fingerprint()
    web = Client()
    web.force_login(people.outsider)
    for p in PAGES_GET:
        assert web.get(f"/launch/{req.uuid}/{p}").status_code == 404, p
    for p in PAGES_POST:
        assert web.post(f"/launch/{req.uuid}/{p}", FORM).status_code == 404, p
    api = APIClient()
    api.force_authenticate(people.outsider)
    assert api.get(f"/api/v1/launch-requests/{req.uuid}").status_code == 404
    resp = api.patch(f"/api/v1/launch-requests/{req.uuid}", {"title": "hijacked"}, format="json")
    assert resp.status_code == 404
    assert resp.json() == {"error": {"code": "not_found", "message": "no such launch request"}}
    for p in API_POST:
        body = {"comment": "x", "regions": {"us-test": "1"}}
        assert api.post(f"/api/v1/launch-requests/{req.uuid}/{p}", body, format="json").status_code == 404, p
    assert api.get("/api/v1/launch-requests").json()["results"] == []
    assert _fingerprint() == before


def test_teammate_sees_and_outsider_list_is_own_only(draft, people):
    api = APIClient()
    api.force_authenticate(people.teammate)
    assert [r["uuid"] for r in api.get("/api/v1/launch-requests").json()["results"]] == [str(draft.uuid)]
    web = Client()
    web.force_login(people.outsider)
    body = web.get("/launch/").content.decode()
    assert str(draft.uuid) not in body
    assert "Assistant launch" not in body
