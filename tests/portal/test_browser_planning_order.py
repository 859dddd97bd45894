"""In Chromium, one page load: the planning page's order cell for a short pool shows the order that
closes its gap, the number capacity.planning_orders.order_to_close answers for that pool (issue 30.4).

Fleet (tests.factories.build_fleet): pool-a, 2 + 2 replicas of 70 CU in two zones, failure policy the
default. Forecast demand in pool-a is flat: expected 200, upside 240, stress 300 CU every hour of the
26 weeks; no entitlement in the pool, so no peak-to-mean factor (1). pool-b has none: not short.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from capacity.failure import parse_failure_policy
from capacity.planning_orders import order_to_close
from entitlements.models import Accelerator, Pool
from forecasting.gap import WEEK_H, cu
from forecasting.models import ForecastRun, PoolDemand
from tests.browser import sign_in

LEVELS = {"expected": 200.0, "upside": 240.0, "stress": 300.0}
WEEKS = 26


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_order_cell_shows_the_order_that_closes_the_gap(browser, serial_live_server, fleet):
    Accelerator.objects.update(cloud_on_demand_per_hour=2.0)  # the planning page prices idle capacity
    start = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    run = ForecastRun.objects.create(status="succeeded", progress=100, attempts=1, finished_at=timezone.now())
    PoolDemand.objects.create(
        run=run,
        pool=fleet.pool_a,
        start=start,
        tenants={"acme": 1.0},
        hourly={k: [v] * (WEEKS * WEEK_H) for k, v in LEVELS.items()},
    )

    ctx, page = sign_in(browser, serial_live_server.url, fleet.operator.username)
    page.goto("/planning/")
    row = page.locator('#action-list tr[data-pool="pool-a"]')
    scenario = row.locator("td").nth(3).inner_text().split(",")[0].strip()
    cell = row.locator("td[data-replicas]")
    shown, text = cell.get_attribute("data-replicas"), cell.inner_text()
    ctx.close()

    # The same pool's answer, asked directly: its supply every week (no orders pending), the
    # scenario's weekly peak as demand, its failure policy, compared at the gap's CU precision.
    pool = Pool.objects.get(pk=fleet.pool_a.pk)
    order = order_to_close(
        [pool.supply()] * WEEKS, [LEVELS[scenario]] * WEEKS, parse_failure_policy(pool.failure_policy), as_cu=cu
    )
    # stress (300 CU a week against the fixture's pool-a) is the gap the page leads with; 6 replicas close it
    assert (scenario, order.closes, order.replicas) == ("stress", True, 6)
    assert shown == str(order.replicas)
    assert f"{order.replicas} × {pool.accelerator.slug}" in text
    zones = [z.zone.slug for z in pool.zones.all()]
    placed = ", ".join(f"{n} in {z}" for z, n in zip(zones, order.added_per_zone, strict=False) if n > 0)
    assert placed in text
