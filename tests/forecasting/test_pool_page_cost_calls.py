"""The pool planning page computes each cost figure once (issue 35.4): a week of busy hours is costed
as arrays per pool, not one capacity.cost.pool_cost per pool and hour (1,505 calls on the demo)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from capacity import cost as capacity_cost
from entitlements import cu_hour_rate
from entitlements.services import entitlement_grant
from forecasting import cost_report, history
from telemetry.models import HourRollup
from tests.clients import web_client
from tests.factories import grant_kwargs

BUSY_HOURS = 48


@pytest.fixture
def busy_week(fleet, finished):
    """acme busy in pool-a and pool-b for two days of the page's 7-day cost window, priced on demand."""
    from django.utils import timezone

    from entitlements.models import Accelerator

    Accelerator.objects.update(cloud_on_demand_per_hour=2.0)
    now = history.floor_hour(timezone.now())
    for pool, cls in ((fleet.pool_a, "reserved"), (fleet.pool_b, "shared")):
        entitlement_grant(
            actor=fleet.operator,
            reason="t",
            **grant_kwargs(pool, fleet.acme, "10", traffic_class=cls, start=now - timedelta(days=3), days=30),
        )
    common = {"tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved"}
    rows = []
    for k in range(1, BUSY_HOURS + 1):
        hour = now - timedelta(hours=k)
        rows.append(
            HourRollup(bucket=hour, decision="complete", output_tokens=100_000 * k, slo_met=9, slo_total=10, **common)
        )
        rows.append(HourRollup(bucket=hour, decision="admit", estimated_wt=k * 1000 * 3600, **common))
    HourRollup.objects.bulk_create(rows)
    return fleet


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"pool_cost": 0}
    real = capacity_cost.pool_cost

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["pool_cost"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(cost_report, "pool_cost", counted)
    monkeypatch.setattr(cu_hour_rate, "pool_cost", counted)
    return calls


def test_the_pool_page_costs_each_pool_a_bounded_number_of_times(busy_week, people, monkeypatch):
    # the busy hours really are in the report (else the bound would hold trivially)
    rows = {r["pool"]: r for r in cost_report.pool_cost_report(days=7)}
    # 9 of 10 requests met the SLO; the scope's output splits evenly between its two pools
    useful = 0.9 * 100_000 * sum(range(1, BUSY_HOURS + 1)) / 2
    assert (rows["pool-a"]["useful_output_tokens"], rows["pool-b"]["useful_output_tokens"]) == (useful, useful)
    calls = _counting(monkeypatch)
    response = web_client(people["operator"]).get("/planning/pools/pool-a/")
    assert response.status_code == 200 and 'id="cost"' in response.content.decode()
    # Per pool: the $ per CU-hour (gap and cost report), the busiest hour's and the quiet hours' full
    # figures; never one per busy hour (that was 2 + 48 + 2 per pool here).
    assert calls["pool_cost"] <= 4 * 2


def test_the_pool_page_query_count_is_bounded(busy_week, people, django_assert_max_num_queries):
    client = web_client(people["operator"])
    with django_assert_max_num_queries(40):  # 35 today, with the session and user; not per pool or hour
        assert client.get("/planning/pools/pool-a/").status_code == 200


@pytest.mark.parametrize(
    "accelerator",
    [
        capacity_cost.PurchasedAccelerator(price=35_040.0, depreciation_years=4.0, maintenance_per_year=1_234.5),
        capacity_cost.CloudAccelerator(on_demand_per_hour=3.17, reserved_per_hour=2.1, commitment="reserved"),
    ],
)
@pytest.mark.parametrize("accelerators_per_replica, replicas", [(8, 5), (1, 3), (4, 0)])
def test_the_hours_at_once_equal_pool_cost_hour_by_hour_to_the_last_bit(
    accelerator, accelerators_per_replica, replicas
):
    """pool_cost_hours is pool_cost's arithmetic over arrays: equal, not close, hour by hour."""
    import numpy as np

    rng = np.random.default_rng(35)
    n_hours = 200
    load = np.concatenate([rng.uniform(0, 1.2, n_hours - 4), [0.0, 1.0, 0.5, 0.1]])
    out_tps = rng.uniform(0, 50_000, n_hours)
    slo = np.concatenate([rng.uniform(1e-9, 1, n_hours - 2), [1.0, 0.99]])
    inputs = capacity_cost.CostInputs(
        host_per_accelerator_hour=0.37,
        software_per_accelerator_hour=0.11,
        storage_per_replica_hour=0.013,
        power_kw_busy_per_accelerator=1.1,
        power_kw_idle_per_accelerator=0.33,
        pue=1.3,
        electricity_per_kwh=0.107,
        retry_waste_fraction=0.03,
    )
    accelerators = capacity_cost.accelerators_for(replicas, accelerators_per_replica, 1)
    clipped = np.minimum(load, 1.0)
    steady = [min(replicas, max(0, round(x * replicas))) for x in clipped.tolist()]
    hours = capacity_cost.pool_cost_hours(
        accelerator=accelerator,
        inputs=inputs,
        accelerators=accelerators,
        accelerators_per_replica=accelerators_per_replica,
        replicas_total=replicas,
        replicas_steady=np.array(steady),
        load_fraction=clipped,
        output_tokens_per_s=out_tps,
        slo_met_fraction=slo,
    )
    for i in range(n_hours):
        one = capacity_cost.pool_cost(
            accelerator=accelerator,
            inputs=dataclasses.replace(inputs, slo_met_fraction=float(slo[i])),
            accelerators=accelerators,
            accelerators_per_replica=accelerators_per_replica,
            replicas_total=replicas,
            replicas_steady=steady[i],
            load_fraction=float(clipped[i]),
            output_tokens_per_s=float(out_tps[i]),
            network_bytes_per_s=0.0,
            out_tps_per_replica=1_000.0,
        )
        assert hours.per_hour[i] == one.per_hour.value
        assert hours.idle_reserve_per_hour[i] == one.idle_reserve_per_hour
        assert hours.useful_output_tokens_per_hour[i] == one.useful_output_tokens_per_hour
