"""Each persona's first screen answers their question (issue 22), in Chromium at 1280 × 800: the planning
action list for operators and approvers, the used ÷ bought meters for tenant members, the launch form's
sizing panel without horizontal overflow and without console errors while typing for requesters.

"First screen" = the answer's top edge lies inside the 800 px viewport without scrolling.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.portal.demo_pages import build_demo

W, H = 1280, 800


def _sign_in(browser: Any, base: str, username: str) -> tuple[Any, Any, list[str]]:
    ctx = browser.new_context(base_url=base, viewport={"width": W, "height": H})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return ctx, page, errors


def _in_first_screen(page: Any, selector: str) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    assert 0 <= box["y"] < H, f"{selector} starts at {box['y']} px, below the first screen"


def _no_overflow(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= W


@pytest.fixture
def demo(transactional_db: Any) -> Any:
    return build_demo()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("who", ["demo-operator", "demo-approver"])
def test_planning_opens_on_what_needs_action(browser, serial_live_server, demo, who):
    ctx, page, errors = _sign_in(browser, serial_live_server.url, who)
    page.goto("/planning/")
    _in_first_screen(page, "#action-list")
    first = page.locator("#action-list tbody tr").first
    assert first.get_attribute("data-late") == "yes"  # late pools first
    assert "×" in first.locator("td[data-replicas]").inner_text()  # replicas × the accelerator to order
    _no_overflow(page)
    page.locator("#action-list tbody tr a").first.click()
    page.wait_for_url("**/planning/pools/**")
    _in_first_screen(page, "#pool-action")
    _no_overflow(page)
    assert errors == []
    ctx.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_viewer_home_opens_on_used_of_bought_meters(browser, serial_live_server, demo):
    ctx, page, errors = _sign_in(browser, serial_live_server.url, "demo-viewer")
    _in_first_screen(page, "#model-totals meter")
    _in_first_screen(page, "#entitlement-table meter")
    assert (
        page.locator("#entitlement-table meter[data-figure]").count()
        == 3 * page.locator("#entitlement-table tbody tr").count()
    )
    # Accessible: each meter names what it measures and carries its value.
    meter = page.locator("#entitlement-table meter").last
    assert "of what was bought used" in meter.get_attribute("aria-label")
    # the value is the share its label reads out (the demo's used ÷ bought moves with the clock, so the
    # two renderings are held to each other, and the figure itself to the statement in test_meters_one_query)
    label = meter.get_attribute("aria-label")
    shown = re.search(r": ([0-9.]+) % of what was bought used", label)
    assert shown is not None, label
    assert round(float(meter.get_attribute("value")) * 100, 1) == float(shown.group(1)) != 0.0
    _no_overflow(page)
    page.goto("/usage/")
    assert "the shortest range with data" in page.locator("#range-note").inner_text()
    assert errors == []
    ctx.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_requester_intake_panel_fits_and_typing_logs_no_errors(browser, serial_live_server, demo):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # bounds waiting on a loaded box, not speed
    ctx, page, errors = _sign_in(browser, serial_live_server.url, "demo-requester")
    page.goto(f"/launch/{demo.uuid}/")
    page.goto("/launch/")
    page.click("#new-request")
    page.wait_for_url("**/launch/new")
    page.locator("#id_title").press_sequentially("Chat assistant", delay=30)
    expect(page.locator("#lr-heading")).to_have_text("Chat assistant")
    page.select_option("#id_model", demo.model.slug)
    page.check(f"input[name=regions][value={demo.region_rows.first().region.slug}]")
    for name, value in {"prompt_p50": 800, "prompt_p95": 3000, "output_p50": 200, "output_p95": 800}.items():
        page.locator(f"#id_{name}").press_sequentially(str(value), delay=20)
    page.locator("#id_committed_value").press_sequentially("12", delay=20)
    expect(page.locator('#sizing td[data-scenario="committed"]')).not_to_have_text("—")
    expect(page.locator("#autosave-status")).to_contain_text("Draft saved")
    page.wait_for_url("**/edit")
    _in_first_screen(page, "#sizing")
    _no_overflow(page)
    # No column of the per-pool table is clipped inside the panel either.
    clipped = page.evaluate(
        "[...document.querySelectorAll('#sizing .table-wrap')].some(w => w.scrollWidth > w.clientWidth + 1)"
    )
    assert not clipped
    assert errors == []
    ctx.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sizing_accelerator_list_follows_the_model(browser, serial_live_server, demo):
    from entitlements.models import OperatingPoint

    ctx, page, errors = _sign_in(browser, serial_live_server.url, "demo-requester")
    page.goto("/sizing/")
    models = page.eval_on_selector_all("#id_model option", "os => os.map(o => o.value)")
    for model in models[:3]:
        page.select_option("#id_model", model)
        offered = page.eval_on_selector_all(
            "#id_accelerator option", "os => os.filter(o => !o.hidden && o.value).map(o => o.value)"
        )
        measured = set(OperatingPoint.objects.filter(model__slug=model).values_list("accelerator__slug", flat=True))
        assert offered and set(offered) == measured, model
    assert errors == []
    ctx.close()


CLIPPED = """() => Array.from(document.querySelectorAll("main table")).map(t => {
  // What a reader cannot see without scrolling sideways: the cells' right edge past the table's scroll box
  // (cells, not the box's scrollWidth: a tooltip's hidden text widens that without hiding anything).
  const right = Math.min(t.parentElement.getBoundingClientRect().right, window.innerWidth);
  const cells = Array.from(t.querySelectorAll("th, td")).map(c => c.getBoundingClientRect().right);
  return {id: t.id || (t.querySelector("caption") || {}).textContent || t.className,
          hidden: Math.round(Math.max(0, ...cells) - right)};
}).filter(t => t.hidden > 1)"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_planning_tables_fit_at_1280_without_sideways_scrolling(browser, serial_live_server, demo):
    """The action list's "what to order" column and the pools tables are read whole at 1280 px: no table's
    scroll box hides a part of it (they were clipped, the order column out of sight)."""
    ctx, page, errors = _sign_in(browser, serial_live_server.url, "demo-operator")
    page.goto("/planning/")
    page.wait_for_selector("#action-list")
    order = page.locator("#action-list td[data-replicas]").first.bounding_box()
    clipped = {"/planning/": page.evaluate(CLIPPED)}
    page.locator("#action-list tbody tr a").first.click()
    page.wait_for_url("**/planning/pools/**")
    clipped["pool"] = page.evaluate(CLIPPED)
    page.goto("/")
    clipped["/"] = page.evaluate(CLIPPED)
    assert clipped == {"/planning/": [], "pool": [], "/": []}
    assert order is not None and order["x"] + order["width"] <= W  # the order column in sight
    assert errors == []
    ctx.close()
