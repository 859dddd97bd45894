"""Every page × persona in one Chromium session (issue 28, docs/pages.md): at 390 × 844 and at 1280 × 800 no
page is wider than the viewport, and axe-core (tests/vendor/axe-core, 4.14.1) finds no WCAG 2.1 A/AA
violation; every box that scrolls sideways on the phone is a focusable, labelled region; the sizing
calculator's answer starts inside the first 800 px; no page reports a Content-Security-Policy violation
(issue 29). Every persona, and the sign-in page. Swagger UI (/api/docs/, third-party) is not walked.

One browser and one signed-in context per persona; each page is loaded once, on the phone, and widened to the
laptop in place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.portal.demo_pages import PERSONAS, build_demo, pages_of

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"
AXE_SOURCE = AXE.read_text(encoding="utf-8")
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 800}
AXE_RUN = """async () => {
  const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
  return r.violations.map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
}"""


# A box that scrolls sideways must be reachable and named: a focusable, labelled region.
UNREACHABLE_BOXES = """[...document.querySelectorAll('main *')].filter(e => {
  const s = getComputedStyle(e);
  return e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(s.overflowX);
}).filter(e => !(e.tabIndex >= 0 && e.getAttribute('role') === 'region' && e.getAttribute('aria-label')))
  .map(e => 'unreachable scroll box: ' + e.tagName + '.' + e.className)"""


def _too_wide(page: Any) -> str:
    width = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    return "" if width[0] <= width[1] else f"{width[0]} px wide in {width[1]} px"


def _axe(page: Any) -> list[str]:
    page.evaluate(AXE_SOURCE)  # as the driver: the page's CSP refuses an added <script>
    return page.evaluate(AXE_RUN)


def _walk(browser: Any, base: str, who: str, paths: list[str]) -> dict[str, list[str]]:
    ctx = browser.new_context(base_url=base, viewport=PHONE)
    # No clock on a page load (Playwright's default is 30 s): on a loaded CI machine the calculator's
    # simulation once took longer, and a slow page is not a wide or inaccessible one.
    ctx.set_default_timeout(0)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Whatever a page's Content-Security-Policy refuses (config/csp.py) is a broken page.
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    found: dict[str, list[str]] = {}
    if who == PERSONAS[0]:  # the sign-in page, once: it is the same for everyone
        for size in (DESKTOP, PHONE):
            page.set_viewport_size(size)
            page.goto("/login/")
            if wide := _too_wide(page):
                found.setdefault(f"/login/ at {size['width']} px", []).append(wide)
            if size is DESKTOP and (violations := _axe(page)):
                found.setdefault("/login/ (axe)", []).extend(violations)
    page.goto("/login/")
    page.fill("input[name=username]", who)
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    # The first Tab reaches the skip link, which leads to the page's main content.
    page.keyboard.press("Tab")
    assert page.evaluate("[document.activeElement.className, document.activeElement.getAttribute('href')]") == [
        "skip-link",
        "#main",
    ]
    # A phone: the menu starts folded, and opens to a list that fits.
    assert page.locator("details.nav-menu").get_attribute("open") is None
    page.click("details.nav-menu > summary")
    assert page.locator("details.nav-menu a[href='/usage/']").is_visible()
    for path in paths:
        # Loaded once, on the phone, then widened to the laptop in place: the same page at both sizes,
        # rendered once (a user turning a tablet), and half the page loads of a walk per size.
        page.set_viewport_size(PHONE)
        response = page.goto(path)
        assert response is not None and response.status == 200, (who, path)
        for size in (PHONE, DESKTOP):
            if size is DESKTOP:
                page.set_viewport_size(DESKTOP)
            if wide := _too_wide(page):
                found.setdefault(f"{path} at {size['width']} px", []).append(wide)
            if size is PHONE and (boxes := page.evaluate(UNREACHABLE_BOXES)):
                found.setdefault(f"{path} at 390 px", []).extend(boxes)
            if size is DESKTOP and path.startswith("/sizing/"):
                # The calculator's answer (replicas, CU, cost, warnings) is on the first screen.
                box = page.locator("#results .headline").first.bounding_box()
                if box is None or box["y"] >= size["height"]:
                    found.setdefault(path, []).append(f"the answer starts at {box and box['y']} px")
            if size is DESKTOP and (violations := _axe(page)):
                found.setdefault(f"{path} (axe)", []).extend(violations)
    if errors:
        found["page errors"] = errors
    ctx.close()
    return found


@pytest.fixture
def demo(transactional_db: Any) -> Any:
    return build_demo(everything=True)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_page_fits_a_phone_and_a_laptop_and_axe_finds_nothing(browser, serial_live_server, demo):
    found = {}
    for who in PERSONAS:
        for where, what in _walk(browser, serial_live_server.url, who, pages_of(who, demo)).items():
            found[f"{who} {where}"] = what
    assert not found, "\n".join(f"{where}: {what}" for where, what in found.items())


def test_the_vendored_axe_is_the_pinned_release():
    assert AXE.read_text(encoding="utf-8").startswith("/*! axe v4.14.1")
