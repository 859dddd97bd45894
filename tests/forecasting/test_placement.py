"""Demand goes to the pool holding each entitlement (one scope, one pool), not by capacity share."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from entitlements.services import entitlement_grant
from forecasting import chunks, demand, placement, services
from forecasting.models import ForecastChunk, ForecastRun, ForecastSeries, PoolDemand
from tests.factories import grant_kwargs
from tests.forecasting.helpers import END

H = 26 * 168


@pytest.fixture
def placed(fleet):
    """acme: 50 CU reserved in pool-a. globex: 30 CU reserved in pool-b and 10 CU shared in pool-a.
    Both pools serve llama-test in us-test; a capacity-share split would put half of each in each."""
    start = END - timedelta(days=30)
    for pool, tenant, cu, cls in (
        (fleet.pool_a, fleet.acme, "50", "reserved"),
        (fleet.pool_b, fleet.globex, "30", "reserved"),
        (fleet.pool_a, fleet.globex, "10", "shared"),
    ):
        entitlement_grant(
            actor=fleet.operator,
            reason="test",
            **grant_kwargs(pool, tenant, cu, traffic_class=cls, start=start, days=60),
        )
    return fleet


def _forecast(tenant: str, level: float) -> demand.SeriesForecast:
    flat = np.full(H, level)
    return demand.SeriesForecast(
        (tenant, "llama-test", "us-test"), "mstl", 504, END, flat, flat * 1.2, flat * 1.5, np.full(168, level)
    )


def test_each_series_goes_to_the_pools_of_its_entitlements_by_their_cu(placed):
    assert placement.pools_by_series(END) == {
        ("acme", "llama-test", "us-test"): [(placed.pool_a.pk, 1.0)],
        ("globex", "llama-test", "us-test"): [(placed.pool_a.pk, 0.25), (placed.pool_b.pk, 0.75)],
    }


def test_pool_demand_sums_the_placed_series_and_leaves_the_unentitled_unplaced(placed):
    # Given expected demand of 40 CU for acme, 20 CU for globex and 5 CU for a tenant with no entitlement
    params = services.Parameters(end=END.isoformat(), spike_hours=0)
    run = ForecastRun.objects.create(parameters={"end": END.isoformat(), "spike_hours": 0}, status="running")
    forecasts = [_forecast("acme", 40.0), _forecast("globex", 20.0), _forecast("initech", 5.0)]
    # When the run's one chunk writes them (placed as the plan places them) and so finishes the run
    placed_by = placement.pools_by_series(END)
    keys = [[*f.key, [list(p) for p in placed_by.get(f.key, [])]] for f in forecasts]
    chunk = ForecastChunk.objects.create(run=run, index=0, keys=keys, state="running", claim_token="w")
    pool_ids = sorted({p for k in keys for p, _ in k[3]})
    PoolDemand.objects.bulk_create([PoolDemand(run=run, pool_id=p, start=END) for p in pool_ids])
    ForecastRun.objects.filter(pk=run.pk).update(chunks_total=1)
    chunks._write(chunk, "w", forecasts, params)
    run.refresh_from_db()
    assert (run.status, run.results_written, run.series_count) == ("succeeded", 1, 3)
    series, pools = list(ForecastSeries.objects.filter(run=run)), list(PoolDemand.objects.filter(run=run))
    # Then pool-a carries acme's 40 and a quarter of globex's 20; pool-b the other three quarters
    by_pool = {p.pool_id: p for p in pools}
    assert set(by_pool) == {placed.pool_a.pk, placed.pool_b.pk}
    a, b = by_pool[placed.pool_a.pk], by_pool[placed.pool_b.pk]
    assert (a.hourly["expected"][0], b.hourly["expected"][0]) == (45.0, 15.0)
    assert (a.hourly["upside"][0], b.hourly["stress"][0]) == (54.0, 22.5)
    assert a.tenants == {"acme": round(40 / 45, 4), "globex": round(5 / 45, 4)}
    assert b.tenants == {"globex": 1.0}
    # and the unentitled tenant's demand is in no pool, which its series says
    assert [s.note for s in series] == ["", "", placement.UNPLACED]


def test_an_ended_entitlement_places_nothing(placed):
    assert placement.pools_by_series(END + timedelta(days=31)) == {}
