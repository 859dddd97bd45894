"""End to end in Debian's Chromium: a requester files and submits, cannot approve their own
request, an approver approves, and the entitlement shows on the tenant's home page only.

Screenshots go to artifacts/screenshots/. Under CI=true a missing Chromium fails the run.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from entitlements.models import Entitlement
from portal.models import LaunchRequest
from tests.browser import sign_in

SHOTS = Path(__file__).resolve().parents[3] / "artifacts" / "screenshots"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_file_submit_refuse_self_approve_approve_and_see_entitlement(browser, serial_live_server, fleet, people):
    from playwright.sync_api import expect

    base = serial_live_server.url
    SHOTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=20_000)  # a loaded CI box is slow; this bounds waiting, not speed
    today = timezone.now().date()

    # The requester files a request through the sectioned form and watches it being sized.
    ctx, page = sign_in(browser, base, "acme-req")
    page.goto("/launch/")
    page.click("#new-request")
    page.wait_for_url("**/launch/new")  # the form, nothing stored yet (issue 22)
    page.fill("#id_title", "Browser launch")
    expect(page.locator("#autosave-status")).to_contain_text("Draft saved")
    page.wait_for_url("**/edit")  # the first save created the draft and the address follows it
    page.select_option("#id_model", "llama-test")
    page.check("input[name=regions][value=us-test]")
    page.fill("#id_launch_date", today.isoformat())
    page.fill("#id_end_date", (today + timedelta(days=30)).isoformat())
    for name, value in {
        "prompt_p50": 1000,
        "prompt_p95": 4000,
        "max_prompt_tokens": 6000,
        "output_p50": 200,
        "output_p95": 800,
        "max_output_tokens": 2000,
        "max_concurrency": 64,
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 200,
        "committed_value": 10,
        "expected_value": 12,
        "upside_value": 20,
        "stress_value": 30,
    }.items():
        page.fill(f"#id_{name}", str(value))
    page.fill("#id_justification", "Public launch")
    # 10 req/s × (1,384.69 + 4 × 283.18) wt (the envelope's means) = 25,174 wt/s = 25.175 CU at the mean
    # rate; at the 0.1 % target on 61 of 64 simulated hours, 28.3 CU (conftest), sized live with its check.
    expect(page.locator("[data-scenario=committed]")).to_have_text("28.300")
    expect(page.locator("[data-check=committed]")).to_contain_text("28.3 CU holds on 61 of 64 simulated hours")
    expect(page.locator("tr[data-pool=pool-a] .headroom")).to_have_text("280.000")
    page.screenshot(path=str(SHOTS / "intake-1-form.png"), full_page=True)
    page.click("#submit-request")
    expect(page.locator("#state")).to_have_text("Submitted")
    req = LaunchRequest.objects.get(title="Browser launch")
    assert req.state == "submitted"
    page.screenshot(path=str(SHOTS / "intake-2-submitted.png"), full_page=True)

    # The requester cannot approve it: no button, and a forged POST is refused.
    assert page.locator("#approve").count() == 0
    token = next(c["value"] for c in ctx.cookies() if c["name"] == "csrftoken")
    resp = page.request.post(
        f"/launch/{req.uuid}/approve",
        form={"csrfmiddlewaretoken": token, "comment": ""},
        headers={"Referer": f"{base}/launch/{req.uuid}/"},
    )
    assert resp.status == 403
    assert LaunchRequest.objects.get(pk=req.pk).state == "submitted"
    assert Entitlement.objects.count() == 0

    # An approver finds it in the queue, reviews it and approves it.
    actx, apage = sign_in(browser, base, "appr1")
    apage.goto("/launch/queue/")
    apage.click(f"tr[data-uuid='{req.uuid}'] a")
    expect(apage.locator("#chart-pool-a .main-svg").first).to_be_visible(timeout=15_000)
    apage.screenshot(path=str(SHOTS / "intake-3-review.png"), full_page=True)
    apage.click("#approve")
    expect(apage.locator("#state")).to_have_text("Approved")
    apage.screenshot(path=str(SHOTS / "intake-4-approved.png"), full_page=True)
    ent = Entitlement.objects.get()
    assert (ent.tenant.slug, str(ent.cu), ent.pool.slug) == ("acme", "28.300", "pool-a")

    # The requester sees the entitlement on their home page; another tenant does not.
    page.goto("/")
    expect(page.locator(f"a[href='/entitlements/{ent.uuid}/']")).to_have_count(1)
    page.screenshot(path=str(SHOTS / "intake-5-home.png"), full_page=True)
    octx, opage = sign_in(browser, base, "globex-req")
    assert opage.locator(f"a[href='/entitlements/{ent.uuid}/']").count() == 0
    assert str(ent.uuid) not in opage.content()
    for c in (ctx, actx, octx):
        c.close()
