"""The launch form at a glance (issue 22): an unmeetable latency target is the sizing panel's first,
red line with the nearest target the pool meets; the heading follows the title; the sizing form never
aborts its own requests (an aborted htmx request logs a console error)."""

from __future__ import annotations

from pathlib import Path

from tests.clients import web_client as _web

ROOT = Path(__file__).resolve().parents[3]


def _post_sizing(c, draft, **over):
    data = {
        "model": "llama-test",
        "regions": ["us-test"],
        "prompt_p50": "1000",
        "prompt_p95": "4000",
        "max_prompt_tokens": "6000",
        "output_p50": "200",
        "output_p95": "800",
        "max_output_tokens": "2000",
        "committed_value": "10",
        "committed_basis": "rps",
        "traffic_class": "reserved",
        "ttft_p99_ms": "2000",
        "tpot_p99_ms": "200",
        "launch_date": str(draft.launch_date),
        "end_date": str(draft.end_date),
    }
    data.update(over)
    return c.post(f"/launch/{draft.uuid}/sizing", data).content.decode()


def test_an_unmeetable_latency_target_is_a_red_first_line_with_the_nearest_feasible(fleet, people, draft):
    c = _web(people.requester)
    assert "slo-infeasible" not in _post_sizing(c, draft)
    body = _post_sizing(c, draft, ttft_p99_ms="1", tpot_p99_ms="1")
    first = body.split('<p class="slo-infeasible"')[1].split("</p>")[0]
    op = fleet.pool_a.operating_point
    ttft = op.measured_ttft_p99_ms or op.ttft_p99_limit_ms
    tpot = op.measured_tpot_p99_ms or op.tpot_p99_limit_ms
    assert 'role="alert" data-pool="pool-a"' in first and "cannot meet this latency target" in first
    assert f"Nearest feasible: TTFT p99 {ttft:,.0f} ms, TPOT p99 {tpot:,.0f} ms" in first
    # First: before the scenario table and the per-region tables.
    assert body.index("slo-infeasible") < body.index("<table")


def test_edit_page_heading_follows_the_title_and_sizing_requests_queue(people, draft):
    page = _web(people.requester).get(f"/launch/{draft.uuid}/edit").content.decode()
    assert '<h1 id="lr-heading">' in page and "/static/js/intake.js" in page
    assert 'getElementById("lr-heading")' in (ROOT / "static" / "js" / "intake.js").read_text(encoding="utf-8")
    assert 'hx-sync="this:queue last"' in page and "this:replace" not in page


def test_a_draft_is_deleted_by_its_author_only_and_never_after_submission(people, draft):
    from portal.models import LaunchRequest, LaunchRequestEvent

    # A teammate (same tenant, also a requester) may not; the draft and its history stay.
    assert _web(people.teammate).post(f"/launch/{draft.uuid}/delete").status_code == 403
    assert _web(people.outsider).post(f"/launch/{draft.uuid}/delete").status_code == 404
    assert LaunchRequest.objects.filter(pk=draft.pk).exists()
    page = _web(people.requester).get(f"/launch/{draft.uuid}/").content.decode()
    assert 'id="delete-draft"' in page
    assert 'id="delete-draft"' not in _web(people.teammate).get(f"/launch/{draft.uuid}/").content.decode()
    resp = _web(people.requester).post(f"/launch/{draft.uuid}/delete")
    assert (resp.status_code, resp["Location"]) == (302, "/launch/")
    assert not LaunchRequest.objects.filter(pk=draft.pk).exists()
    assert not LaunchRequestEvent.objects.filter(request_id=draft.pk).exists()


def test_a_submitted_request_is_not_deleted(people, draft):
    from portal.models import LaunchRequest
    from portal.services.intake import launch_request_submit

    launch_request_submit(actor=people.requester, request=draft)
    resp = _web(people.requester).post(f"/launch/{draft.uuid}/delete")
    assert resp.status_code == 409 and "never submitted" in resp.content.decode()
    assert LaunchRequest.objects.filter(pk=draft.pk).exists()


def test_after_a_partial_approval_the_page_shows_cu_and_requests_per_second(people, submitted):
    import re

    c = _web(people.approver)
    resp = c.post(f"/launch/{submitted.uuid}/partially-approve", {"cu_us-test": "5", "comment": "what fits"})
    assert resp.status_code == 302
    html = _web(people.requester).get(f"/launch/{submitted.uuid}/").content.decode()
    row = html.split('data-region="us-test"')[1].split("</tr>")[0]
    assert '<td class="num">5.000</td>' in row
    rps = float(re.search(r'class="num approved-rps">([\d.,]+) req/s<', row).group(1))
    # The request's committed 10 req/s is 25.175 CU at its mix's mean rate (tests/portal/intake/conftest.py):
    # 5 CU carries 10 × 5 ÷ 25.175 = 1.99 req/s on average.
    assert rps == 1.99


def test_decisions_reach_the_requesters_inbox(people, submitted, django_capture_on_commit_callbacks):
    from alerts.models import Notification

    with django_capture_on_commit_callbacks(execute=True):
        resp = _web(people.approver).post(
            f"/launch/{submitted.uuid}/partially-approve", {"cu_us-test": "5", "comment": "what fits"}
        )
    assert resp.status_code == 302
    note = Notification.objects.get(user=people.requester, kind="launch_request.partially_approve")
    assert "partially approved" in note.title and note.link == f"/launch/{submitted.uuid}/"
    assert "what fits" in note.body
    # How much was granted, and the states in words (the body said "submitted → partially_approved").
    assert "us-test: approved 5.0 of 28.3 CU" in note.body
    assert "State: Submitted → Partially approved" in note.body and "_" not in note.body
