import re
from datetime import timedelta

from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from portal.models import LaunchRequest
from portal.selectors import day_start
from tests.clients import web_client as _web
from tests.factories import grant_kwargs
from tests.figures import figures


def test_requester_creates_draft_and_sees_sectioned_form(fleet, people):
    c = _web(people.requester)
    key = re.search(r'name="draft" value="([0-9a-f-]+)"', c.get("/launch/new").content.decode()).group(1)
    resp = c.post("/launch/new", {"draft": key, "title": "First"})  # a plain POST (no htmx) redirects
    req = LaunchRequest.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/launch/{req.uuid}/edit"
    page = c.get(resp["Location"]).content.decode()
    for section in ("Basics", "Regions and window", "Workload envelope", "Scenarios", "Justification"):
        assert f"<strong>{section}" in page
    assert 'hx-trigger="input changed delay:300ms, change"' in page
    assert f'hx-post="/launch/{req.uuid}/sizing"' in page
    assert f'hx-post="/launch/{req.uuid}/autosave"' in page


def test_autosave_keeps_valid_fields_and_names_the_bad_one(draft, people):
    c = _web(people.requester)
    resp = c.post(
        f"/launch/{draft.uuid}/autosave",
        {
            "title": "Renamed",
            "model": "llama-test",
            "regions": ["us-test"],
            "prompt_p50": "abc",
            "output_p50": "300",
            "committed_value": "5",
            "committed_basis": "rps",
            "traffic_class": "reserved",
        },
    )
    assert resp.status_code == 200
    body = resp.content.decode()
    assert re.search(r'id="err-prompt_p50" hx-swap-oob="true">Enter a whole number.<', body)
    draft.refresh_from_db()
    assert (draft.title, draft.output_p50, draft.committed_value) == ("Renamed", 300, 5.0)
    assert draft.prompt_p50 == 1000  # the bad field kept what was already accepted


def test_sizing_partial_shows_cu_replicas_and_headroom(fleet, people, draft):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    c = _web(people.requester)
    resp = c.post(
        f"/launch/{draft.uuid}/sizing",
        {
            "model": "llama-test",
            "regions": ["us-test"],
            "prompt_p50": "1000",
            "output_p50": "200",
            "committed_value": "20",
            "committed_basis": "rps",
            "traffic_class": "reserved",
            "launch_date": str(draft.launch_date),
            "end_date": str(draft.end_date),
        },
    )
    body = resp.content.decode()
    # 20 × 1800 wt/s = 36 CU at the mean rate; at the 0.1 % target on 61 of 64 simulated hours, 40.4 CU
    # (the planning answer across draws, docs/contract.md §3);
    # 70 CU per replica → 1 replica; pool-a 280 − 100 sold = 180 headroom.
    assert '<td class="num" data-scenario="committed">40.400</td>' in body
    assert "committed: 20 req/s × 1,800.0 wt ÷ 1,000 = 36.000 CU at the mean rate" in body
    assert re.search(
        r'data-pool="pool-a">\s*<td>pool-a</td>\s*'
        r'<td class="num">70.00</td>\s*<td class="num">280.000</td>\s*<td class="num">100.000</td>\s*'
        r'<td class="num headroom">180.000</td>\s*<td class="num">1</td>',
        body,
    )
    # pool-b has the most headroom after the grant: it would take it (entitlements.pool_choice).
    assert re.search(r'data-pool="pool-b">\s*<td>pool-b <small>\(would take it\)</small></td>', body)
    draft.refresh_from_db()
    assert draft.committed_value == 10.0  # sizing previews, it does not save


def test_submit_from_form_shows_inline_errors_then_succeeds(fleet, people, draft):
    c = _web(people.requester)
    resp = c.post(
        f"/launch/{draft.uuid}/submit",
        {"title": "Assistant launch", "model": "llama-test", "regions": ["us-test"], "justification": ""},
    )
    assert resp.status_code == 400
    assert re.search(r'id="err-justification">required before submitting<', resp.content.decode())
    assert LaunchRequest.objects.get(pk=draft.pk).state == "draft"
    draft_form = {
        "title": "Assistant launch",
        "model": "llama-test",
        "regions": ["us-test"],
        "launch_date": str(draft.launch_date),
        "end_date": str(draft.end_date),
        "traffic_class": "reserved",
        "criticality": "high",
        "prompt_p50": 1000,
        "prompt_p95": 4000,
        "max_prompt_tokens": 6000,
        "output_p50": 200,
        "output_p95": 800,
        "max_output_tokens": 2000,
        "max_concurrency": 64,
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 200,
        "streaming": "on",
        "justification": "launch",
        **{f"{s}_value": 10 for s in ("committed", "expected", "upside", "stress")},
        **{f"{s}_basis": "rps" for s in ("committed", "expected", "upside", "stress")},
    }
    resp = c.post(f"/launch/{draft.uuid}/submit", draft_form)
    assert resp.status_code == 302
    assert LaunchRequest.objects.get(pk=draft.pk).state == "submitted"


def test_review_page_has_chart_commitments_and_gap(fleet, people, submitted):
    start = day_start(submitted.launch_date) + timedelta(hours=2)
    # One scope lives in one pool: globex fills pool-a as reserved and pool-b as shared.
    for pool, cu, cls in ((fleet.pool_a, "270", "reserved"), (fleet.pool_b, "265", "shared")):
        entitlement_grant(
            actor=fleet.operator,
            reason="x",
            **grant_kwargs(pool, fleet.globex, cu, start=start, days=60, traffic_class=cls),
        )
    body = _web(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    fig = figures(body)["chart-pool-a"]
    assert [t["name"] for t in fig["data"]][:3] == ["already sold", "this request", "deliverable"]
    # The window starts at midnight, the globex grants two hours later: sold steps 0 → 270 inside it.
    assert fig["data"][0]["y"][:2] == [0.0, 270.0]
    assert set(fig["data"][1]["y"]) == {28.3} and set(fig["data"][2]["y"]) == {280.0}
    assert body.count("<td>globex</td>") == 2  # the two commitments
    # pool-a has 10 CU, pool-b 15 CU: the 28.3 CU asked is 18.3 and 13.3 short; the region is 13.3 CU short.
    assert '<td class="num gap">18.300</td>' in body and '<td class="num gap">13.300</td>' in body
    assert "Supply gap in us-test: 13.300 CU short in the best pool." in body
    assert 'id="approve"' in body


def test_requester_detail_hides_other_tenants_commitments(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "50", days=60))
    body = _web(people.requester).get(f"/launch/{submitted.uuid}/").content.decode()
    assert "globex" not in body
    assert figures(body) == {} and "data-figure" not in body
    assert 'id="approve"' not in body
    assert '<li data-transition="submit">' in body


def test_approver_approves_from_the_page_and_self_filer_cannot(fleet, people, submitted):
    resp = _web(people.requester).post(f"/launch/{submitted.uuid}/approve", {"comment": ""})
    assert resp.status_code == 403
    assert "only approvers decide launch requests" in resp.content.decode()
    resp = _web(people.approver).post(f"/launch/{submitted.uuid}/approve", {"comment": "go"})
    assert resp.status_code == 302
    assert LaunchRequest.objects.get(pk=submitted.pk).state == "approved"
    assert Entitlement.objects.filter(tenant=fleet.acme).count() == 1


def test_self_filed_request_cannot_be_approved_on_the_page(fleet, people):
    from portal.services import intake
    from tests.portal.intake.launch_fields import complete_fields

    req = intake.launch_request_create(actor=people.self_approver, **complete_fields(fleet))
    intake.launch_request_submit(actor=people.self_approver, request=req)
    c = _web(people.self_approver)
    body = c.get(f"/launch/{req.uuid}/").content.decode()
    assert 'id="approve"' not in body and "another approver decides it" in body
    resp = c.post(f"/launch/{req.uuid}/approve", {})
    assert resp.status_code == 403
    assert LaunchRequest.objects.get(pk=req.pk).state == "submitted"
    assert Entitlement.objects.count() == 0


def test_partial_approval_and_headroom_refusal_on_the_page(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "275", days=60))
    entitlement_grant(
        actor=fleet.operator,
        reason="x",
        **grant_kwargs(fleet.pool_b, fleet.globex, "275", days=60, traffic_class="shared"),
    )
    c = _web(people.approver)
    resp = c.post(f"/launch/{submitted.uuid}/approve", {})
    assert resp.status_code == 409
    # Both pools have 5 CU left: the default pool is the first of the tie (pool-a), and it refuses.
    assert "pool pool-a has 5.000 CU of headroom left" in resp.content.decode()
    resp = c.post(f"/launch/{submitted.uuid}/partially-approve", {"cu_us-test": "5", "comment": ""})
    assert resp.status_code == 400
    assert "comment: required: say why only part is approved" in resp.content.decode()
    resp = c.post(f"/launch/{submitted.uuid}/partially-approve", {"cu_us-test": "5", "comment": "what fits"})
    assert resp.status_code == 302
    assert LaunchRequest.objects.get(pk=submitted.pk).state == "partially_approved"


def test_queue_filters(fleet, people, submitted):
    c = _web(people.approver)
    assert str(submitted.uuid) in c.get("/launch/queue/").content.decode()
    assert (
        str(submitted.uuid)
        in c.get("/launch/queue/?state=submitted&model=llama-test&region=us-test&tenant=acme").content.decode()
    )
    assert str(submitted.uuid) not in c.get("/launch/queue/?tenant=globex").content.decode()
    assert str(submitted.uuid) not in c.get(f"/launch/queue/?launch_after={submitted.end_date}").content.decode()
    assert str(submitted.uuid) not in c.get("/launch/queue/?state=approved").content.decode()
    assert _web(people.requester).get("/launch/queue/").status_code == 403


def test_activity_partial_lists_events(people, submitted):
    body = _web(people.teammate).get(f"/launch/{submitted.uuid}/activity").content.decode()
    assert body.count("<li data-transition=") == 2
    assert "acme-req</strong>\n        submit (draft → submitted)" in body
