"""The demo's launch requests (issue 28.3): one in each state, filed through the intake services, one
waiting in the approver's queue; a second load changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from demo.fleet import load_demo
from demo.launches import PLAN
from entitlements.models import Entitlement
from portal.models import LaunchRequest, LaunchRequestEvent

pytestmark = pytest.mark.django_db


def _state():
    reqs = sorted(LaunchRequest.objects.values_list("uuid", "state", "updated_at"))
    grants = sorted(Entitlement.objects.values_list("uuid", "cu", "version"))
    return reqs, LaunchRequestEvent.objects.count(), grants


def test_every_state_once_through_the_services_and_a_second_load_changes_nothing(client):
    load_demo()
    before = Entitlement.objects.count()
    out = StringIO()
    call_command("seed_launches", stdout=out)
    states = dict(LaunchRequest.objects.values_list("title", "state"))
    assert sorted(states.values()) == sorted(state for _, state, _, _ in PLAN)
    assert set(states.values()) == {"draft", "submitted", "approved", "partially_approved", "rejected", "returned"}
    # the decisions were taken by the services: events by the requester and the approver, real grants
    steps = set(LaunchRequestEvent.objects.values_list("transition", "actor__username"))
    assert {("submit", "demo-requester"), ("approve", "demo-approver"), ("return", "demo-approver")} <= steps
    approved = LaunchRequest.objects.get(state="approved")
    assert approved.region_rows.get().entitlement is not None
    partial = LaunchRequest.objects.get(state="partially_approved")
    assert sorted((r.region.slug, r.entitlement is not None) for r in partial.region_rows.all()) == [
        ("eu-west", False),
        ("us-east", True),
    ]
    assert Entitlement.objects.count() == before + 2

    first = _state()
    again = StringIO()
    call_command("seed_launches", stdout=again)
    assert again.getvalue().strip() == "launch requests: already present, unchanged"
    assert _state() == first

    client.force_login(get_user_model().objects.get(username="demo-approver"))
    queue = client.get("/launch/queue/").content.decode()
    assert "Search answers beta" in queue  # the submitted one waits for the approver
    assert "Code review assistant" not in queue
