"""The operator's fleet page in Debian's Chromium: new fleet samples and throttles appear without a reload."""

from __future__ import annotations

import pytest
from django.utils import timezone

from entitlements.reasons import REASONS
from telemetry.services import fleet_samples_ingest, ingest_events
from tests.browser import sign_in
from tests.telemetry.helpers import event

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_fleet_page_updates_by_itself(browser, serial_live_server, fleet):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # the page polls every 5 s; a loaded CI box is slow
    base = serial_live_server.url
    _, page = sign_in(browser, base, "op")
    page.goto("/fleet/?range=15m")
    row = page.locator("#fleet-panels tbody tr", has_text=fleet.pool_a.slug)
    expect(row).to_contain_text("never")
    expect(page.locator("#fleet-panels")).to_contain_text("Tenant-caused throttles")
    page.evaluate("document.getElementById('fleet-panels').dataset.old = '1'")

    now = timezone.now()
    sample = {"pool": fleet.pool_a.slug, "ts": now.isoformat(), "replicas_healthy": 3, "replicas_total": 4,
              "accelerator_util": 0.61, "kv_cache_usage": 0.42}  # fmt: skip
    assert fleet_samples_ingest(source="gw", samples=[sample]).accepted == 1
    throttled = [event(i, ts=now.isoformat(), decision="throttle", reason="QUOTA_EXCEEDED") for i in range(7)]
    assert ingest_events(source="gw", events=throttled).accepted == 7

    # the polled partial replaced the section (no reload: the marker set on the old one is gone)
    expect(page.locator("#fleet-panels[data-old]")).to_have_count(0)
    expect(row).to_contain_text("3 / 4")
    expect(row).to_contain_text("61 %")
    expect(row).to_contain_text("42 %")
    # The code with its one-line meaning (entitlements.reasons), then the count.
    meaning = REASONS["QUOTA_EXCEEDED"].when
    expect(page.locator("#fleet-panels .tenant-caused")).to_contain_text(f"QUOTA_EXCEEDED {meaning}: 7")
    assert page.url == f"{base}/fleet/?range=15m"
