"""Every transition × every kind of person, through the API (same services as the pages).

The request is filed by `self_approver` (an acme requester who is also an approver), so the
approver-who-filed-it column is real; `requester` is their teammate.
"""

import pytest
from rest_framework.test import APIClient

from entitlements.models import Entitlement
from portal.models import LaunchRequest
from portal.services import intake
from tests.portal.intake.launch_fields import complete_fields

OK = 200
ROLES = ["requester", "viewer", "outsider", "approver", "self_approver", "operator", "gateway"]
DECIDE = {
    "requester": 403,
    "viewer": 403,
    "outsider": 404,
    "approver": OK,
    "self_approver": 403,
    "operator": 403,
    "gateway": 403,
}
FILE = {
    "requester": OK,
    "viewer": 403,
    "outsider": 404,
    "approver": 403,
    "self_approver": OK,
    "operator": 403,
    "gateway": 403,
}

# transition: (start state, body, expected status per role, state after success)
TABLE = {
    "submit": ("draft", {}, FILE, "submitted"),
    "withdraw-draft": ("draft", {}, FILE, "withdrawn"),
    "withdraw": ("submitted", {}, FILE, "withdrawn"),
    "approve": ("submitted", {"comment": "fine"}, DECIDE, "approved"),
    "partially-approve": ("submitted", {"regions": {"us-test": "5"}, "comment": "half"}, DECIDE, "partially_approved"),
    "reject": ("submitted", {"comment": "no"}, DECIDE, "rejected"),
    "return": ("submitted", {"comment": "fix it"}, DECIDE, "returned"),
}


def _request_in(state, fleet, people):
    req = intake.launch_request_create(actor=people.self_approver, **complete_fields(fleet))
    if state == "submitted":
        intake.launch_request_submit(actor=people.self_approver, request=req)
    return LaunchRequest.objects.get(pk=req.pk)


@pytest.mark.parametrize("name", list(TABLE))
def test_transition_by_role(name, fleet, people):
    start, body, expected, after = TABLE[name]
    path = name.removesuffix("-draft")
    seen = {}
    for role in ROLES:
        req = _request_in(start, fleet, people)
        events_before = req.events.count()
        ents_before = Entitlement.objects.count()
        client = APIClient()
        client.force_authenticate(getattr(people, role))
        resp = client.post(f"/api/v1/launch-requests/{req.uuid}/{path}", body, format="json")
        seen[role] = resp.status_code
        req.refresh_from_db()
        if resp.status_code == OK:
            assert req.state == after, role
            assert resp.json()["state"] == after
            assert req.events.count() == events_before + 1
        else:
            assert req.state == start, role
            assert req.events.count() == events_before, role
            assert Entitlement.objects.count() == ents_before, role
            assert set(resp.json()["error"]) >= {"code", "message"}
    assert seen == expected


def test_self_approval_message_says_why(fleet, people):
    req = _request_in("submitted", fleet, people)
    client = APIClient()
    client.force_authenticate(people.self_approver)
    resp = client.post(f"/api/v1/launch-requests/{req.uuid}/approve", {}, format="json")
    assert resp.status_code == 403
    assert resp.json()["error"]["message"] == "you filed this request; another approver must decide it"


@pytest.mark.parametrize(
    ("start", "path", "who"),
    [
        ("draft", "approve", "approver"),
        ("draft", "reject", "approver"),
        ("submitted", "submit", "requester"),
        ("approved", "withdraw", "requester"),
        ("approved", "approve", "approver2"),
    ],
)
def test_transition_from_wrong_state_is_409(start, path, who, fleet, people):
    req = _request_in("submitted" if start == "approved" else start, fleet, people)
    if start == "approved":
        intake.launch_request_approve(actor=people.approver, request=req)
    client = APIClient()
    client.force_authenticate(getattr(people, who))
    resp = client.post(f"/api/v1/launch-requests/{req.uuid}/{path}", {"comment": "x"}, format="json")
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "conflict"
    assert LaunchRequest.objects.get(pk=req.pk).state == start


def test_bad_input_is_400_naming_the_field(fleet, people):
    req = _request_in("submitted", fleet, people)
    client = APIClient()
    client.force_authenticate(people.approver)
    resp = client.post(f"/api/v1/launch-requests/{req.uuid}/reject", {"comment": ""}, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"]["fields"] == {"comment": ["required: say why the request is rejected"]}
    resp = client.post(
        f"/api/v1/launch-requests/{req.uuid}/partially-approve",
        {"regions": {"us-test": "-1"}, "comment": "x"},
        format="json",
    )
    assert resp.status_code == 400
    assert list(resp.json()["error"]["fields"]) == ["regions"]
    assert LaunchRequest.objects.get(pk=req.pk).state == "submitted"
