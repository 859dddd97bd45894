"""A launch request's workload kind (docs/contract.md §3, "Which workload is replayed"): the catalogue kind
(data/workload_cv.csv) whose minute-rate CV an envelope is replayed at when the request states no CV and its
tenant × model × class has recorded none. One per request, as the CV: the four scenarios are volumes of one
traffic. On the form (the live panel re-sizes), the API, the audit snapshots, the review and the grant.

The complete request's committed 10 req/s (conftest), each the 61st smallest of 64 draws' own least CU at the
reserved class's 0.1 %: conversation (CV 0.21) 28.3 CU, coding (CV 1.04) 111.0 CU; the same figures
POST /api/v1/sizing answers for that envelope with `workload_kind` (one function, one answer).
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from entitlements.models import Accelerator, Entitlement
from portal.models import LaunchRequest
from portal.selectors import cu_decimal, size_request
from portal.services import intake
from portal.sizing_fit import launch_shape
from tests.clients import api_client, web_client

API = "/api/v1/launch-requests"
FORM = {"title": "Renamed", "model": "llama-test", "regions": ["us-test"], "traffic_class": "reserved"}
SCENARIOS = {
    "prompt_p50": "1000",
    "prompt_p95": "4000",
    "max_prompt_tokens": "6000",
    "output_p50": "200",
    "output_p95": "800",
    "max_output_tokens": "2000",
    "committed_value": "10",
    "committed_basis": "rps",
}
CU = {"conversation": Decimal("28.300"), "coding": Decimal("111.000")}
KINDS_NAMED = "expected one of coding, conversation"


def _autosave(people, draft, **fields):
    return web_client(people.requester).post(f"/launch/{draft.uuid}/autosave", FORM | fields)


@pytest.mark.parametrize("kind", ["conversation", "coding"])
def test_intake_sizes_each_kind_as_the_sizing_api_does(fleet, people, submitted, kind):
    """The same envelope and rate, two kinds, two figures: intake's committed CU is POST /api/v1/sizing's
    cu_to_buy with the same `workload_kind`, check for check."""
    submitted.workload_kind = kind
    sized_here = size_request(submitted, [])
    Accelerator.objects.filter(pk=fleet.pool_a.accelerator_id).update(cloud_on_demand_per_hour=2.0)
    shape = launch_shape(submitted)
    body = {
        "model": fleet.pool_a.model.slug,
        "arrival_rate_rps": submitted.committed_value,
        "prompt_tokens": shape.prompt.__dict__,
        "output_tokens": shape.output.__dict__,
        "slo": {"ttft_p99_s": 2, "tpot_p99_s": 0.2},
        "workload_kind": kind,
    }
    sized = api_client(people.requester).post("/api/v1/sizing", body, format="json").json()
    assert sized_here.cu["committed"] == cu_decimal(sized["cu_to_buy"]) == CU[kind]
    assert sized["replay"] == sized_here.planned.replay.to_dict() and sized["check"] == sized_here.planned.check
    assert sized["minute_rate_cv"] == sized_here.minute_rate_cv == {"conversation": 0.21, "coding": 1.04}[kind]
    assert sized["cv_source"] == sized_here.minute_rate_cv_source
    assert sized_here.minute_rate_cv_source.startswith(f"the catalogue default for {kind} traffic")


def test_the_form_offers_the_kinds_and_autosave_stores_one(people, draft):
    page = web_client(people.requester).get(f"/launch/{draft.uuid}/edit").content.decode()
    select = re.search(r'<select name="workload_kind"[^>]*>(.*?)</select>', page, re.S)
    assert select is not None
    assert re.findall(r'<option value="([^"]+)"', select.group(1)) == ["conversation", "coding"]
    assert '<option value="conversation" selected>conversation: minute-rate CV 0.21</option>' in select.group(1)
    assert _autosave(people, draft, workload_kind="coding").status_code == 200
    draft.refresh_from_db()
    assert draft.workload_kind == "coding"
    _autosave(people, draft)  # a post without the field keeps the saved kind
    draft.refresh_from_db()
    assert draft.workload_kind == "coding"


def test_an_unknown_kind_is_named_and_everything_else_typed_is_kept(people, draft):
    r = _autosave(people, draft, workload_kind="poetry", minute_rate_cv="0.5", committed_value="11")
    page = r.content.decode()
    err = re.search(r'id="err-workload_kind" hx-swap-oob="true">([^<]*)<', page)
    assert err is not None and err.group(1) == f"unknown workload kind poetry: {KINDS_NAMED}"
    draft.refresh_from_db()
    assert (draft.title, draft.minute_rate_cv, draft.committed_value, draft.workload_kind) == (
        "Renamed",
        0.5,
        11.0,
        "conversation",
    )


def test_the_service_refuses_an_unknown_kind_naming_the_field(people, draft):
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_update(actor=people.requester, request=draft.uuid, workload_kind="poetry")
    assert exc.value.message_dict == {"workload_kind": [f"unknown workload kind 'poetry': {KINDS_NAMED}"]}
    draft.refresh_from_db()
    assert draft.workload_kind == "conversation"


def test_the_live_panel_resizes_for_the_kind_on_screen_and_saves_nothing(people, draft):
    c = web_client(people.requester)
    pages = {
        kind: c.post(f"/launch/{draft.uuid}/sizing", FORM | SCENARIOS | {"workload_kind": kind}).content.decode()
        for kind in ("conversation", "coding")
    }
    for kind, page in pages.items():
        assert f'data-scenario="committed">{CU[kind]}<' in page
        cv = {"conversation": "0.21", "coding": "1.04"}[kind]
        assert f'id="intake-minute-cv">minute-rate CV {cv}, the default</span>' in page
        assert f"Minute-rate CV: the catalogue default for {kind} traffic" in page
        assert f"Workload kind {kind}:\n      its catalogue CV is the one used." in page
    draft.refresh_from_db()
    assert draft.workload_kind == "conversation"  # a preview saves nothing


def test_the_api_takes_the_kind_refuses_an_unknown_one_and_sizes_with_it(people, draft):
    c = api_client(people.requester)
    assert c.get(f"{API}/{draft.uuid}").json()["workload_kind"] == "conversation"
    for bad in ("poetry", "", 3, None, "coding\x00", "\x00", "c" * 100_000, 1e308, "9999-12-31", ["coding"]):
        r = c.patch(f"{API}/{draft.uuid}", {"workload_kind": bad}, format="json")
        assert r.status_code == 400 and list(r.json()["error"]["fields"]) == ["workload_kind"], (bad, r.json())
    draft.refresh_from_db()
    assert draft.workload_kind == "conversation"  # nothing of a refused patch was kept
    assert c.get(f"{API}/{draft.uuid}").status_code == 200  # and the next request is answered
    r = c.patch(f"{API}/{draft.uuid}", {"workload_kind": "poetry"}, format="json")
    assert r.json()["error"]["fields"]["workload_kind"] == [f"unknown workload kind 'poetry': {KINDS_NAMED}"]
    r = c.patch(f"{API}/{draft.uuid}", {"workload_kind": "coding"}, format="json")
    assert r.status_code == 200
    body = r.json()
    assert body["workload_kind"] == "coding" and body["scenario_cu"]["committed"] == "111.000"
    assert "coefficient of variation 1.04" in body["scenario_planning"]["committed"]["planning_basis"]
    draft.refresh_from_db()
    assert draft.workload_kind == "coding"


def test_filing_and_submitting_record_the_kind_in_the_audit(fleet, people):
    c = api_client(people.requester)
    fields = {"title": "Coding launch", "model": "llama-test", "regions": ["us-test"], "workload_kind": "coding"}
    r = c.post(API, fields, format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["workload_kind"] == "coding"
    filed = body["events"][0]
    assert filed["transition"] == "create" and filed["changes"]["filed"]["workload_kind"] == "coding"
    r = c.post(API, {**fields, "workload_kind": "poetry"}, format="json")
    assert r.status_code == 400 and list(r.json()["error"]["fields"]) == ["workload_kind"]
    assert LaunchRequest.objects.count() == 1


def test_the_submission_snapshot_carries_the_kind(people, draft):
    intake.launch_request_update(actor=people.requester, request=draft.uuid, workload_kind="coding")
    intake.launch_request_submit(actor=people.requester, request=draft.uuid)
    submit = draft.events.get(transition="submit")
    assert submit.changes["submitted"]["workload_kind"] == "coding"


def test_the_review_shows_the_kind_and_the_grant_is_sized_with_it(people, submitted):
    LaunchRequest.objects.filter(pk=submitted.pk).update(workload_kind="coding")
    page = web_client(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert '<td id="workload-kind" data-origin="catalogue">coding (its catalogue CV is used)</td>' in page
    assert '<td id="minute-rate-cv">1.04 (the default)</td>' in page
    assert 'data-scenario="committed">111.000<' in page
    intake.launch_request_approve(actor=people.approver, request=submitted)
    assert Entitlement.objects.get(tenant=submitted.tenant).cu == CU["coding"]


def test_a_stated_cv_wins_over_the_kind_and_the_page_says_so(people, submitted):
    LaunchRequest.objects.filter(pk=submitted.pk).update(workload_kind="coding", minute_rate_cv=0.5)
    page = web_client(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert '<td id="workload-kind" data-origin="stated">coding (not used: the request states its CV)</td>' in page
    assert 'data-scenario="committed">49.000<' in page  # the CV 0.5 figure (test_minute_rate_cv.py)


def test_the_tenants_recorded_cv_wins_over_the_kind_and_the_page_names_its_source(people, submitted):
    """acme sent the public code trace's minutes for this model and class (CV about 1.0): a request of the
    conversation kind is sized at that recorded CV, not at conversation's 0.21, and the page says which."""
    from tests.telemetry.test_minute_cv import _code_minutes, _record

    _record(_code_minutes(), tenant="acme", model=submitted.model.slug, traffic_class=submitted.traffic_class)
    sized = size_request(submitted, [])
    assert sized.minute_rate_cv_origin == "recorded" and 0.95 < sized.minute_rate_cv < 1.15
    page = web_client(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    kind = re.search(r'<td id="workload-kind" data-origin="recorded">([^<]*)</td>', page)
    assert kind is not None and kind.group(1) == "conversation (not used: the tenant's recorded CV wins)", page
    assert "what acme × llama-test × reserved sent over the last 28 days" in page
    assert f'data-scenario="committed">{sized.cu["committed"]}<' in page
    assert sized.cu["committed"] != CU["conversation"]
    # The kind changes nothing while the record stands.
    submitted.workload_kind = "coding"
    assert size_request(submitted, []).cu == sized.cu
