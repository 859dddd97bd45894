"""Issue 52's must-show in Debian's Chromium: as a requester types the committed rate and the dates in the
launch form, the availability rows appear (every pool serving the model, the asked region first, the best
one marked, no other tenant named), and the alternative region can be asked for instead.

Fleet: pool-a and pool-b (280 CU each) in us-test, pool-eu (280 CU) in eu-test; globex holds 270 CU of
pool-a, so the 28.300 CU the form sizes fits pool-b best (pool-a has 10.000 left).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from entitlements.services import entitlement_grant
from tests import factories as f
from tests.browser import sign_in

FIELDS = {
    "prompt_p50": 1000,
    "prompt_p95": 4000,
    "max_prompt_tokens": 6000,
    "output_p50": 200,
    "output_p95": 800,
    "max_output_tokens": 2000,
    "max_concurrency": 64,
    "ttft_p99_ms": 2000,
    "tpot_p99_ms": 200,
}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_rows_appear_as_the_form_is_typed(browser, serial_live_server, fleet, people, eu_pool):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # a loaded CI box is slow; this bounds waiting, not speed
    kw = f.grant_kwargs(fleet.pool_a, fleet.globex, 270, start=timezone.now() - timedelta(hours=1), days=90)
    entitlement_grant(actor=None, reason="browser test", **kw)
    today = timezone.now().date()
    errors: list[str] = []
    ctx, page = sign_in(browser, serial_live_server.url, "acme-req")
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto("/launch/new")
    expect(page.locator("#availability-missing")).to_contain_text("Fill in the model")
    page.fill("#id_title", "Where is capacity")
    page.select_option("#id_model", "llama-test")
    page.check("input[name=regions][value=us-test]")
    for name, value in FIELDS.items():
        page.fill(f"#id_{name}", str(value))
    # The CU and the dates, typed: the rows follow them.
    page.fill("#id_committed_value", "10")
    page.fill("#id_launch_date", today.isoformat())
    page.fill("#id_end_date", (today + timedelta(days=30)).isoformat())
    rows = page.locator("#availability-rows tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_attribute("data-pool", "pool-a")
    expect(page.locator("tr[data-pool=pool-a] .available")).to_have_text("10.000")
    expect(page.locator("tr[data-pool=pool-b] .available")).to_have_text("280.000")
    expect(page.locator("#availability-rows tbody tr[data-pool=pool-eu]")).to_have_count(1)
    expect(page.locator("#availability-rows .best-mark")).to_have_count(1)
    expect(page.locator("tr[data-pool=pool-b] .best-mark")).to_have_count(1)
    expect(page.locator("tr[data-pool=pool-a] .why")).to_contain_text(
        "18.300 CU short; 1 more replica of 70.00 CU would cover it"
    )
    assert "globex" not in page.locator("#availability").inner_html()
    # More CU typed (120 req/s, over 280 CU): no pool fits it, none is marked, without a reload.
    page.fill("#id_committed_value", "120")
    expect(page.locator("tr[data-pool=pool-b] .why")).to_contain_text("CU short")
    expect(page.locator("#availability-rows .best-mark")).to_have_count(0)
    # The alternative region: asking there instead moves the request's region.
    page.fill("#id_committed_value", "10")
    expect(page.locator("tr[data-pool=pool-b] .best-mark")).to_have_count(1)
    page.click("tr[data-pool=pool-eu] button.alt-region")
    expect(page.locator("input[name=regions][value=eu-test]")).to_be_checked()
    expect(page.locator("input[name=regions][value=us-test]")).not_to_be_checked()
    expect(page.locator("#availability-rows tbody tr").nth(0)).to_have_attribute("data-pool", "pool-eu")
    assert errors == []
    ctx.close()
