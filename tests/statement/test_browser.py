"""A tenant viewer opens their statement in a real browser and sees the latency promise (whose misses)
and the envelope panel (observed against promised, the concurrency peak against the cap)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from entitlements.models import Membership
from tests.telemetry.helpers import T0

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_viewer_sees_the_latency_promise_and_the_envelope(known, fleet, serial_live_server, browser):
    viewer = get_user_model().objects.create_user("acme-viewer", password="demo")
    Membership.objects.create(user=viewer, tenant=fleet.acme, role="viewer")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    period = f"start={T0.date().isoformat()}&end={(T0 + timedelta(days=1)).date().isoformat()}"
    page.goto(f"{serial_live_server.url}/entitlements/{known.uuid}/statement/?{period}")
    page.fill("input[name=username]", "acme-viewer")
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_selector("#latency-promise")

    promise = page.locator("#latency-promise")
    assert "3 of 4" in promise.inner_text()  # met of served that reported it
    assert page.locator("#misses-platform").inner_text() == "1"  # c2's miss, inside everything
    assert page.locator("#misses-outside").inner_text() == "0"
    assert page.locator("#served").inner_text() == "5"
    assert page.locator("#not-served").inner_text() == "0 / 0 / 0"
    envelope = page.locator("#envelope-conformance")
    assert envelope.is_visible()
    assert "prompt tokens p95" in envelope.inner_text()
    assert page.locator("#concurrency-peak").inner_text() == "3"
    rows = envelope.locator("tbody tr")
    assert rows.nth(2).inner_text().split("\t")[1:3] == ["8,000", "3,000"]  # prompt max: promised, observed
