"""The fleet page in a real browser updates itself: a new fleet sample shows up without a reload."""

from datetime import UTC, datetime

import pytest

from entitlements.models import PlatformRole
from telemetry.services import fleet_samples_ingest
from tests import factories as f

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sample(util: float, healthy: int) -> dict:
    return {"pool": "pool-a", "ts": datetime.now(UTC).isoformat(), "replicas_healthy": healthy, "replicas_total": 4,
            "accelerator_util": util, "kv_cache_usage": 0.5, "requests_running": 3, "requests_waiting": 0}  # fmt: skip


def test_fleet_page_polls_and_shows_the_new_sample(live_server, page):  # noqa: F811
    fleet = f.build_fleet()
    PlatformRole.objects.get_or_create(user=fleet.operator, role="operator")
    assert fleet_samples_ingest(source="test", samples=[_sample(0.25, 4)]).accepted == 1

    page.goto(f"{live_server.url}/login/?next=/fleet/")
    page.fill("input[name=username]", "op")
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    row = page.locator("#fleet-panels tbody tr", has_text="pool-a")
    assert row.locator("td").nth(1).inner_text() == "4 / 4"
    assert row.locator("td").nth(2).inner_text() == "25 %"

    # A zone goes down: the next poll (every 5 s) must show it, with no navigation.
    assert fleet_samples_ingest(source="test", samples=[_sample(0.75, 2)]).accepted == 1
    page.wait_for_function(
        """() => [...document.querySelectorAll('#fleet-panels tbody tr')]
                 .some(tr => tr.innerText.includes('pool-a') && tr.children[1].innerText.trim() === '2 / 4')""",
        timeout=20_000,
    )
    assert row.locator("td").nth(2).inner_text() == "75 %"
    assert page.url == f"{live_server.url}/fleet/"
