"""A pool on an accelerator the catalogue has no price for still gets a cost row (overheads and power),
saying it is unpriced, instead of failing the whole report (the sizing API refuses such a request)."""

import pytest

from forecasting import cost_report

pytestmark = pytest.mark.django_db


def test_an_unpriced_accelerator_is_a_row_that_says_so(fleet):
    acc = fleet.pool_a.accelerator
    assert (acc.purchase_price_usd, acc.cloud_on_demand_per_hour, acc.cloud_reserved_per_hour) == (0, 0, 0)
    acc.host_cost_per_hour, acc.software_cost_per_hour = 1.5, 0.25
    acc.save()
    fleet.pool_a.refresh_from_db()
    apr = fleet.pool_a.accelerators_per_replica
    assert cost_report.replica_hour_cost(fleet.pool_a) == pytest.approx(apr * 1.75)  # overheads, chip at 0
    rows = {r["pool"]: r for r in cost_report.pool_cost_report(days=1)}
    assert rows["pool-a"]["pricing"] == cost_report.UNPRICED
    assert rows["pool-a"]["cost_usd"] == pytest.approx(24 * cost_report.replica_hour_cost(fleet.pool_a) * 4)
