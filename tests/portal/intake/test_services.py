from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from portal.models import LaunchRequest, LaunchRequestEvent
from portal.services import intake
from tests.factories import grant_kwargs
from tests.portal.intake.launch_fields import complete_fields


def test_submit_refuses_incomplete_draft_naming_fields(fleet, people):
    req = intake.launch_request_create(actor=people.requester, title="half done")
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_submit(actor=people.requester, request=req)
    assert exc.value.message_dict["model"] == ["required before submitting"]
    assert exc.value.message_dict["regions"] == ["choose at least one region"]
    req.refresh_from_db()
    assert req.state == "draft"


def test_submit_refuses_envelope_out_of_order(fleet, people):
    req = intake.launch_request_create(actor=people.requester, **complete_fields(fleet, prompt_p95=500))
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_submit(actor=people.requester, request=req)
    assert exc.value.message_dict == {"prompt_p50": ["prompt p50 (1000) must be ≤ prompt p95 (500)"]}


def test_submit_writes_event_and_emails_requester_and_approvers(submitted, people, django_capture_on_commit_callbacks):
    ev = LaunchRequestEvent.objects.get(request=submitted, transition="submit")
    assert (ev.actor, ev.from_state, ev.to_state) == (people.requester, "draft", "submitted")
    assert ev.changes["state"] == ["draft", "submitted"]
    assert ev.changes["submitted"]["regions"] == ["us-test"]
    assert ev.changes["submitted"]["committed_value"] == 10.0


def test_submit_emails_on_commit(fleet, people, draft, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        intake.launch_request_submit(actor=people.requester, request=draft)
    recipients = sorted(tuple(m.to) for m in mail.outbox)
    assert recipients == [
        ("acme-lead@example.org", "appr1@example.org", "appr2@example.org"),
        ("acme-req@example.org",),
    ]


def test_approve_grants_committed_cu_per_region_with_envelope(
    fleet, people, eu_pool, django_capture_on_commit_callbacks
):
    req = intake.launch_request_create(
        actor=people.requester,
        **complete_fields(fleet, regions=[fleet.pool_a.region, eu_pool.region]),
    )
    intake.launch_request_submit(actor=people.requester, request=req)
    with django_capture_on_commit_callbacks(execute=True):
        req = intake.launch_request_approve(actor=people.approver, request=req, comment="ok")
    assert req.state == "approved"
    ents = list(Entitlement.objects.filter(tenant=fleet.acme).order_by("region__slug"))
    assert [(e.region.slug, e.pool.slug, e.cu, e.traffic_class_id) for e in ents] == [
        ("eu-test", "pool-eu", Decimal("28.300"), "reserved"),  # 61 of 64 simulated hours (contract §3)
        ("us-test", "pool-a", Decimal("28.300"), "reserved"),
    ]
    assert (ents[0].prompt_p50, ents[0].output_p95, ents[0].max_concurrency) == (1000, 800, 64)
    assert ents[0].starts_at.date() == req.launch_date and ents[0].ends_at.date() == req.end_date
    ev = req.events.get(transition="approve")
    assert ev.changes["regions"]["us-test"]["approved_cu"] == "28.300"
    assert [m.to for m in mail.outbox] == [["acme-req@example.org"]]


def test_approve_when_headroom_vanished_changes_nothing(fleet, people, submitted):
    # Someone else takes pool-a and pool-b down to 10 CU of headroom each after the request was sized.
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "270", days=60))
    entitlement_grant(
        actor=fleet.operator,
        reason="x",
        **grant_kwargs(fleet.pool_b, fleet.globex, "270", days=60, traffic_class="shared"),
    )
    before = Entitlement.objects.count()
    with pytest.raises(intake.HeadroomGone) as exc:
        intake.launch_request_approve(actor=people.approver, request=submitted)
    # The default pool has the most headroom after the grant (a tie: pool-a); if it cannot hold it, none can.
    assert "pool pool-a has 10.000 CU of headroom left" in str(exc.value)
    assert "us-test" in str(exc.value)
    submitted.refresh_from_db()
    assert submitted.state == "submitted"
    assert Entitlement.objects.count() == before
    assert not submitted.events.filter(transition="approve").exists()
    assert list(submitted.region_rows.values_list("approved_cu", "entitlement")) == [(None, None)]


def test_approve_is_all_or_nothing_across_regions(fleet, people, eu_pool):
    req = intake.launch_request_create(
        actor=people.requester, **complete_fields(fleet, regions=[fleet.pool_a.region, eu_pool.region])
    )
    intake.launch_request_submit(actor=people.requester, request=req)
    # us-test still fits; eu-test (granted second: slugs order eu < us, so eu first) is full.
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(eu_pool, fleet.globex, "280", days=60))
    before = Entitlement.objects.count()
    with pytest.raises(intake.HeadroomGone):
        intake.launch_request_approve(actor=people.approver, request=req)
    assert Entitlement.objects.count() == before
    assert LaunchRequest.objects.get(pk=req.pk).state == "submitted"


def test_partially_approve_per_region_and_zero_means_none(fleet, people, eu_pool):
    req = intake.launch_request_create(
        actor=people.requester, **complete_fields(fleet, regions=[fleet.pool_a.region, eu_pool.region])
    )
    intake.launch_request_submit(actor=people.requester, request=req)
    req = intake.launch_request_partially_approve(
        actor=people.approver, request=req, region_cu={"us-test": "12.5", "eu-test": "0"}, comment="EU later"
    )
    assert req.state == "partially_approved"
    assert list(Entitlement.objects.filter(tenant=fleet.acme).values_list("region__slug", "cu")) == [
        ("us-test", Decimal("12.500"))
    ]
    assert dict(req.region_rows.values_list("region__slug", "approved_cu")) == {
        "eu-test": Decimal("0.000"),
        "us-test": Decimal("12.500"),
    }


def test_partially_approve_validates_per_region_and_comment(fleet, people, submitted):
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_partially_approve(
            actor=people.approver, request=submitted, region_cu={"us-test": 5}, comment=""
        )
    assert exc.value.message_dict == {"comment": ["required: say why only part is approved"]}
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_partially_approve(
            actor=people.approver, request=submitted, region_cu={"us-test": "28.301"}, comment="x"
        )
    assert exc.value.message_dict == {"regions.us-test": ["more than the 28.300 CU requested"]}
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_partially_approve(actor=people.approver, request=submitted, region_cu={}, comment="x")
    assert exc.value.message_dict == {"regions.us-test": ["enter the CU to approve here (0 for none)"]}
    submitted.refresh_from_db()
    assert submitted.state == "submitted"


def test_partially_approve_above_headroom_names_pool(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "275", days=60))
    entitlement_grant(
        actor=fleet.operator,
        reason="x",
        **grant_kwargs(fleet.pool_b, fleet.globex, "275", days=60, traffic_class="shared"),
    )
    with pytest.raises(intake.HeadroomGone) as exc:
        intake.launch_request_partially_approve(
            actor=people.approver, request=submitted, region_cu={"us-test": "6"}, comment="what is left"
        )
    assert "pool pool-a has 5.000 CU of headroom left" in str(exc.value)
    intake.launch_request_partially_approve(
        actor=people.approver, request=submitted, region_cu={"us-test": "5"}, comment="what is left"
    )
    assert Entitlement.objects.filter(tenant=fleet.acme).get().pool == fleet.pool_a


def test_return_then_edit_reopens_as_draft(fleet, people, submitted):
    intake.launch_request_return(actor=people.approver, request=submitted, comment="lower the stress case")
    req = intake.launch_request_update(actor=people.teammate, request=submitted.uuid, stress_value=2_000_000.0)
    assert req.state == "draft"
    assert list(req.events.values_list("transition", "from_state", "to_state")) == [
        ("create", "", "draft"),
        ("submit", "draft", "submitted"),
        ("return", "submitted", "returned"),
        ("reopen", "returned", "draft"),
    ]
    intake.launch_request_submit(actor=people.requester, request=req)
    assert LaunchRequest.objects.get(pk=req.pk).state == "submitted"


def test_reject_and_return_need_a_comment(people, submitted):
    for fn in (intake.launch_request_reject, intake.launch_request_return):
        with pytest.raises(ValidationError) as exc:
            fn(actor=people.approver, request=submitted, comment="  ")
        assert list(exc.value.message_dict) == ["comment"]
    submitted.refresh_from_db()
    assert submitted.state == "submitted"


def test_state_field_is_protected(submitted):
    with pytest.raises(AttributeError):
        submitted.state = "approved"


def test_fsm_condition_refuses_a_decision_with_no_region(people, submitted):
    # Rows cannot be removed after submission through the services; the transition's condition
    # is the guard of last resort if they disappear anyway.
    submitted.region_rows.all().delete()
    with pytest.raises(intake.LaunchRequestConflict) as exc:
        intake.launch_request_approve(actor=people.approver, request=submitted)
    assert str(exc.value).startswith("cannot approve this request now")
    assert LaunchRequest.objects.get(pk=submitted.pk).state == "submitted"
    assert not submitted.events.filter(transition="approve").exists()
