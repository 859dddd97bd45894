"""In Debian's Chromium: a requester changes the workload kind of a complete draft and the live panel re-sizes
(28.300 CU as conversation, 111.000 as coding: test_workload_kind.py), names the catalogue source, and the
kind is saved with the draft."""

from __future__ import annotations

import pytest

from portal.models import LaunchRequest
from tests.browser import sign_in


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_choosing_coding_resizes_the_panel_and_saves(browser, serial_live_server, fleet, people, draft):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # a loaded CI box is slow; this bounds waiting, not speed
    errors: list[str] = []
    ctx, page = sign_in(browser, serial_live_server.url, "acme-req")
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"/launch/{draft.uuid}/edit")
    expect(page.locator("#id_workload_kind")).to_have_value("conversation")
    expect(page.locator("[data-scenario=committed]")).to_have_text("28.300")
    page.select_option("#id_workload_kind", "coding")
    # 64 replayed hours at CV 1.04 on a loaded box: a longer bound on waiting (not a speed requirement).
    expect(page.locator("[data-scenario=committed]")).to_have_text("111.000", timeout=120_000)
    expect(page.locator("#intake-cv-source")).to_contain_text("the catalogue default for coding traffic")
    expect(page.locator("#intake-workload-kind")).to_contain_text("its catalogue CV is the one used")
    expect(page.locator("#autosave-status")).to_contain_text("Draft saved")
    assert LaunchRequest.objects.get(pk=draft.pk).workload_kind == "coding"
    assert errors == []
    ctx.close()
