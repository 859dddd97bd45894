"""The operator home in a real browser: the chart draws, and redraws after an htmx swap."""

import pytest

from tests import factories as f

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operator_signs_in_and_sees_the_capacity_chart(live_server, page):
    f.build_fleet()  # user "op", password "demo", two pools

    page.goto(f"{live_server.url}/")
    assert page.url == f"{live_server.url}/login/?next=/"
    page.fill("input[name=username]", "op")
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_selector("#capacity-breakdown .main-svg")

    assert page.locator("#pools tbody tr").count() == 2
    assert page.locator("#capacity-breakdown g.trace.bars").count() == 6  # one per term of the formula
    page.evaluate("() => { document.getElementById('pools').dataset.old = '1'; }")
    page.click("text=Refresh")
    # The swap replaces the section (and the chart's div); charts.js must draw into the new one.
    # A function, not an expression: Playwright evaluates a bare expression with eval, which the CSP refuses.
    page.wait_for_function(
        "() => !document.querySelector('#pools[data-old]') && !!document.querySelector('#capacity-breakdown .main-svg')"
    )
    assert page.locator("#pools tbody tr").count() == 2
