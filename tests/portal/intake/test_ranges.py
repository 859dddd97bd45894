"""Launch request ranges (issue 11.5): refused on create, autosave, API and submit; a launch date in
the past is refused; a row stored before the limits still renders (its page and the lists) and can be rejected."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.models import LaunchRequest
from portal.services.intake import launch_request_reject
from tests.clients import api_client, web_client

API = "/api/v1/launch-requests"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("committed_value", 1e308),
        ("committed_value", 100_001),  # rps basis: at most 100,000
        ("max_concurrency", 99_999_999),
        ("max_prompt_tokens", 10_000_001),
        ("ttft_p99_ms", 600_001),
    ],
)
def test_the_api_refuses_a_value_out_of_range_on_create_and_on_edit(fleet, people, draft, field, value):
    c = api_client(people.requester)
    r = c.post(API, {"title": "x", field: value}, format="json")
    assert r.status_code == 400 and field in r.json()["error"]["fields"]
    r = c.patch(f"{API}/{draft.uuid}", {field: value}, format="json")
    assert r.status_code == 400 and field in r.json()["error"]["fields"]
    assert LaunchRequest.objects.count() == 1
    assert c.get(API).status_code == 200


def test_a_launch_date_in_the_past_is_refused(fleet, people, draft):
    c = api_client(people.requester)
    yesterday = (timezone.now().date() - timedelta(days=1)).isoformat()
    r = c.patch(f"{API}/{draft.uuid}", {"launch_date": yesterday}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"launch_date": ["the launch date has passed"]}


def test_autosave_keeps_the_good_fields_and_names_the_out_of_range_one(draft, people):
    r = web_client(people.requester).post(
        f"/launch/{draft.uuid}/autosave",
        {"title": "Renamed", "model": "llama-test", "regions": ["us-test"], "max_concurrency": "99999999",
         "committed_value": "1e308", "committed_basis": "rps", "traffic_class": "reserved"},
    )  # fmt: skip
    body = r.content.decode()
    assert re.search(r'id="err-max_concurrency" hx-swap-oob="true">[^<]*less than or equal to 1000000', body)
    assert re.search(r'id="err-committed_value" hx-swap-oob="true">[^<]+<', body)
    draft.refresh_from_db()
    assert (draft.title, draft.max_concurrency, draft.committed_value) == ("Renamed", 64, 10.0)


def test_a_row_stored_before_the_limits_renders_cannot_be_submitted_and_can_be_rejected(draft, people):
    LaunchRequest.objects.filter(pk=draft.pk).update(committed_value=1e9, max_concurrency=99_999_999)
    requester = web_client(people.requester)
    r = requester.post(f"/launch/{draft.uuid}/submit")
    assert r.status_code == 400
    r = api_client(people.requester).post(f"{API}/{draft.uuid}/submit", {}, format="json")
    assert r.status_code == 400
    assert set(r.json()["error"]["fields"]) == {"committed_value", "max_concurrency"}
    # filed before the limits existed and submitted then: it renders, and an approver can reject it
    LaunchRequest.objects.filter(pk=draft.pk).update(state="submitted", submitted_at=timezone.now())
    approver = web_client(people.approver)
    assert approver.get(f"/launch/{draft.uuid}/").status_code == 200
    assert approver.get("/launch/queue/").status_code == 200
    assert api_client(people.approver).get(API).status_code == 200
    assert api_client(people.requester).get(f"{API}/{draft.uuid}").status_code == 200
    launch_request_reject(actor=people.approver, request=draft.uuid, comment="out of range")
    draft.refresh_from_db()
    assert draft.state == "rejected"
