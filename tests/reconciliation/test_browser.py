"""An operator acts on a right-size finding in a real browser and lands on the prefilled amendment."""

from __future__ import annotations

from decimal import Decimal

import pytest

from entitlements.models import Entitlement
from reconciliation.models import Finding
from reconciliation.services import run_request
from tests.reconciliation.conftest import every_hour, row

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operator_acts_on_a_right_size_and_lands_on_the_prefilled_amendment(grant, serial_live_server, browser):
    ent = grant("2")
    # 20 % of 2 CU every hour of the window, 60 requests an hour: the replay right-sizes to 0.4 CU (issue 30)
    wt = 0.2 * 2 * 1000 * 3600 / 60
    every_hour(ent, lambda i, ts: [row(ent, ts, "complete", actual_wt=wt, prompt_tokens=1000) for _ in range(60)])
    run_request()  # autocommit: the run happens as its row commits (the embedded default runs it inline)
    finding = Finding.objects.get(entitlement=ent, kind="right_size_down")

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{serial_live_server.url}/reconciliation/")
    page.fill("input[name=username]", "op")
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_selector("#findings")
    page.click("#findings tr[data-kind=right_size_down] a")
    page.wait_for_selector("#finding-action")
    assert "Amend to 0.4 CU" in page.locator("#finding-action").inner_text()
    page.click("#amend-entitlement")
    page.wait_for_selector("#amend-form")
    assert page.url == f"{serial_live_server.url}/reconciliation/{finding.pk}/amend/"
    assert page.input_value("input[name=cu]") == "0.4"
    assert "right-size down" in page.input_value("input[name=reason]")
    page.click("#amend-save")
    page.wait_for_selector("#finding-state")
    assert page.locator("#finding-state").inner_text() == "Accepted"
    assert Entitlement.objects.get(pk=ent.pk).cu == Decimal("0.400")
