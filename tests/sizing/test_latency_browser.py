"""The calculator's latency-vs-load chart draws in Chromium with no console errors (docs/latency.md)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.browser import sign_in
from tests.factories import TenantFactory, member
from tests.sizing.test_latency_answer import measured  # noqa: F401 - the fixture
from tests.sizing.test_page import FORM

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"
AXE_RUN = """async () => {
  const r = await axe.run('#latency', {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
  return r.violations.map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
}"""
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_latency_chart_renders_with_both_panels_and_no_console_errors(measured, serial_live_server, browser):  # noqa: F811
    member("lat-ann", TenantFactory(slug="acme"), "requester")
    ctx, page = sign_in(browser, serial_live_server.url, "lat-ann")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto("/sizing/?" + urlencode(FORM))
    page.wait_for_selector("#latency-chart .main-svg")

    # Plotly drew the six traces on two y axes, with the SLO, planning and breaking lines.
    assert page.locator("#latency-chart .scatterlayer .trace").count() == 6
    assert page.locator("#latency-chart .yaxislayer-above").count() >= 1
    assert page.locator("#latency-chart .shapelayer path").count() == 4
    assert "req/s" in page.locator("#slo-breaking-rate").inner_text()
    page.click("#latency-curve > summary")  # the curve's formula and points, folded by default
    assert "TPOT p99(x) =" in page.locator("#latency-formula").inner_text()
    page.evaluate(AXE.read_text(encoding="utf-8"))  # as the driver: the page's CSP refuses an added <script>
    assert page.evaluate(AXE_RUN) == []  # the section adds no WCAG 2.1 A/AA violation
    assert errors == []
    ctx.close()
