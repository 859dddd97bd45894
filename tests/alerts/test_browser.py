"""In a real browser: an alert raised by the evaluation task shows in a person's inbox (with the
unread count in the nav), and marking it read clears it."""

from __future__ import annotations

import pytest

from alerts.models import Notification
from alerts.tasks import evaluate_rules
from tests import factories as f
from tests.alerts.conftest import minutes, now, rule, traffic
from tests.browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_person_sees_an_alert_in_the_inbox_and_marks_it_read(browser, serial_live_server):
    fleet = f.build_fleet()
    viewer = f.member("acme-view", fleet.acme, "viewer")
    rule(name="acme throttles", scope="tenant", tenant=fleet.acme, threshold=10, channels=[])
    t = now()
    traffic(t - minutes(2), admits=10, throttles=5)
    assert evaluate_rules.delay(t.isoformat()).get()["opened"] == 1  # the beat task, inline

    ctx, page = sign_in(browser, serial_live_server.url, "acme-view")
    assert page.locator("#nav-unread").inner_text() == "1"
    page.click("#nav-inbox")
    page.wait_for_url(f"{serial_live_server.url}/alerts/")
    row = page.locator("tr.notification.unread")
    assert row.count() == 1
    assert "acme: 33.3 % of 15 requests throttled" in row.inner_text()
    assert page.locator("#unread-count").inner_text() == "1"

    row.locator("button.mark-read").click()
    page.wait_for_selector("tr.notification.read")
    assert page.locator("tr.notification.unread").count() == 0
    assert page.locator("#unread-count").inner_text() == "0"
    assert page.locator("#nav-unread").count() == 0
    assert Notification.objects.get(user=viewer).read_at is not None
    ctx.close()
