"""Supply gap, order-by dates, stranded capacity and the cost of being wrong, on a known demand."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from entitlements.services import entitlement_grant
from forecasting import gap
from forecasting.models import ForecastRun, PoolDemand, SupplyOrder
from tests.factories import grant_kwargs
from tests.forecasting.helpers import END

WEEKS, H = 26, 168
TODAY = date(2026, 3, 2)


def _step(first: float, after: float) -> list[float]:
    """First 10 weeks at one level, the remaining 16 at another."""
    return [first] * (10 * H) + [after] * (16 * H)


@pytest.fixture
def planned(fleet):
    """pool-a: 4 replicas (2 + 2 zones) × 70 CU = 280 healthy, 140 after losing a zone. Lead time 12 weeks.
    A replica costs 8 accelerators × (2.00 on-demand + 0.50 host) = 20 USD/h."""
    acc = fleet.pool_a.accelerator
    acc.cloud_on_demand_per_hour, acc.host_cost_per_hour, acc.lead_time_weeks = 2.0, 0.5, 12
    acc.save()
    run = ForecastRun.objects.create(status="succeeded", progress=100)
    PoolDemand.objects.create(
        run=run,
        pool=fleet.pool_a,
        start=END,
        tenants={"acme": 1.0},
        hourly={"expected": _step(100, 200), "upside": _step(120, 240), "stress": _step(150, 300)},
    )
    return fleet, run


def _pool(run):
    _, pools = gap.supply_gap(run=run, today=TODAY)
    assert [p["pool"] for p in pools] == ["pool-a"]
    return pools[0]


def _without_order(g: dict) -> dict:
    return {k: v for k, v in g.items() if k != "order"}


def test_first_short_week_order_by_and_late(planned):
    _, run = planned
    g = _pool(run)["gaps"]
    week10 = date(2026, 5, 11)
    assert g["expected"]["healthy"]["first_week"] is None
    assert g["upside"]["healthy"]["first_week"] is None
    # Stress needs 300 CU after losing a zone: 5 replicas in each of the two zones, 6 more than the
    # 2 + 2 today (a healthy-only count said 1, which leaves the after-failure gap open).
    assert _without_order(g["stress"]["healthy"]) == {
        "first_week": week10,
        "order_by": date(2026, 2, 16),
        "late": True,
        "max_gap_cu": 20.0,
        "replicas_short": 6,
    }
    # Expected needs 200 after a zone loss: 3 + 3 (210), two more, one in each zone; one replica
    # (3 + 2) still loses 3 and keeps 140.
    assert _without_order(g["expected"]["failure"]) == {
        "first_week": week10,
        "order_by": date(2026, 2, 16),
        "late": True,
        "max_gap_cu": 60.0,
        "replicas_short": 2,
    }
    assert g["expected"]["failure"]["order"] == {
        "replicas": 2,
        "closes": True,
        "closes_within_horizon": True,
        "by_zone": [{"zone": "us-test-a", "add": 1}, {"zone": "us-test-b", "add": 1}],
        "week": week10,
        "demand_cu": 200.0,
        "after_order": {"healthy_cu": 420.0, "failure_cu": 210.0},
        "arrives": TODAY + timedelta(weeks=12),
        "reason": "",
    }
    assert _without_order(g["stress"]["failure"]) == {
        "first_week": TODAY,
        "order_by": date(2025, 12, 8),
        "late": True,
        "max_gap_cu": 160.0,
        "replicas_short": 6,
    }


@pytest.mark.parametrize("scenario", ["expected", "upside", "stress"])
def test_the_recommended_order_closes_the_gap_in_both_cases(planned, scenario):
    fleet, run = planned
    order = _pool(run)["gaps"][scenario]["failure"]["order"]
    assert order["closes"]
    SupplyOrder.objects.create(pool=fleet.pool_a, replicas=order["replicas"], arrival_date=TODAY, status="ordered")
    g = _pool(run)["gaps"][scenario]
    assert g["healthy"]["first_week"] is None and g["failure"]["first_week"] is None
    weeks = _pool(run)["weeks"]
    assert (
        min(w["failure_cu"] - w[f"{scenario}_cu"] for w in weeks)
        == {"expected": 10.0, "upside": 40.0, "stress": 50.0}[scenario]
    )
    # the supply with the order placed is exactly what the order said it would be, every week
    assert {(w["healthy_cu"], w["failure_cu"]) for w in weeks} == {
        (order["after_order"]["healthy_cu"], order["after_order"]["failure_cu"])
    }
    # and one replica fewer does not close it
    SupplyOrder.objects.filter(pool=fleet.pool_a).update(replicas=order["replicas"] - 1)
    g = _pool(run)["gaps"][scenario]
    assert g["healthy"]["first_week"] is not None or g["failure"]["first_week"] is not None


def test_a_one_zone_pool_under_a_zone_policy_says_it_cannot_close(planned):
    fleet, run = planned
    pool = fleet.pool_a
    pool.zones.exclude(pk=pool.zones.first().pk).delete()
    g = _pool(run)["gaps"]["expected"]["failure"]
    assert g["replicas_short"] is None
    assert g["order"]["closes"] is False
    assert "one zone" in g["order"]["reason"]


def test_an_order_arriving_after_the_horizon_says_so(planned):
    fleet, run = planned
    acc = fleet.pool_a.accelerator
    acc.lead_time_weeks = 30
    acc.save()
    order = _pool(run)["gaps"]["stress"]["failure"]["order"]
    assert order["replicas"] == 6 and order["closes_within_horizon"] is False
    assert "after the horizon" in order["reason"]


def test_an_order_by_in_the_future_is_not_late(planned):
    _, run = planned
    _, pools = gap.supply_gap(run=run, today=date(2026, 2, 16))
    assert pools[0]["gaps"]["stress"]["healthy"]["late"] is False


def test_pending_orders_add_replicas_from_their_arrival_week(planned):
    fleet, run = planned
    SupplyOrder.objects.create(pool=fleet.pool_a, replicas=2, arrival_date=date(2026, 5, 13), status="ordered")
    SupplyOrder.objects.create(pool=fleet.pool_a, replicas=50, arrival_date=date(2026, 3, 3), status="cancelled")
    p = _pool(run)
    assert [(w["replicas"], w["healthy_cu"], w["failure_cu"]) for w in p["weeks"][9:11]] == [
        (4, 280.0, 140.0),
        (6, 420.0, 210.0),
    ]
    assert p["gaps"]["stress"]["healthy"]["first_week"] is None
    assert p["gaps"]["expected"]["failure"]["first_week"] is None
    assert p["gaps"]["stress"]["failure"]["first_week"] == TODAY
    assert p["gaps"]["stress"]["failure"]["max_gap_cu"] == 90.0


def test_committed_is_the_peak_sold_in_each_week(planned):
    fleet, run = planned
    entitlement_grant(
        actor=fleet.operator, reason="test", **grant_kwargs(fleet.pool_a, fleet.acme, "50", start=END, days=14)
    )
    assert [w["committed_cu"] for w in _pool(run)["weeks"][:3]] == [50.0, 50.0, 0.0]


def test_stranded_capacity_and_its_cost(planned):
    _, run = planned
    s = _pool(run)["stranded"]
    # (280 − 100) for 10 weeks and (280 − 200) for 16 weeks, per hour
    assert s["mean_cu"] == pytest.approx((10 * 180 + 16 * 80) / 26)
    # 517,440 CU-hours ÷ 70 CU per replica = 7,392 replica-hours × 20 USD
    assert s["cost_usd"] == pytest.approx(147_840.0)


def test_cost_of_being_wrong_both_ways(planned):
    _, run = planned
    rows = {r["scenario"]: r for r in _pool(run)["cost_of_being_wrong"]}
    # Planned for expected, upside arrives: 20 CU short for 1,680 h and 40 CU for 2,688 h, × 3,600 s × R 1,000
    assert rows["upside"]["under_throttled_wt"] == (20 * 1680 + 40 * 2688) * 3600 * 1000
    assert rows["upside"]["under_tenants_affected"] == 1
    assert rows["upside"]["today_throttled_wt"] == 0.0
    assert rows["upside"]["today_tenants_affected"] == 0
    assert rows["upside"]["over_idle_cost_usd"] == pytest.approx((20 * 1680 + 40 * 2688) / 70 * 20)
    assert rows["stress"]["under_throttled_wt"] == (50 * 1680 + 100 * 2688) * 3600 * 1000
    # Today's 280 CU covers stress until week 10, then 20 CU short
    assert rows["stress"]["today_throttled_wt"] == 20 * 2688 * 3600 * 1000
    assert rows["stress"]["over_idle_cost_usd"] == pytest.approx((50 * 1680 + 100 * 2688) / 70 * 20)


def test_new_replicas_fill_the_smallest_zone_first():
    assert gap.add_replicas((3, 1, 2), 3) == (3, 3, 3)
    assert gap.add_replicas((), 2) == (2,)


def test_no_finished_run_means_no_gap(db):
    ForecastRun.objects.create(status="running")
    assert gap.supply_gap(today=TODAY) == (None, [])


def test_week_starts_follow_the_run(planned):
    _, run = planned
    weeks = _pool(run)["weeks"]
    assert len(weeks) == WEEKS
    assert [w["start"] for w in weeks[:2]] == [TODAY, TODAY + timedelta(weeks=1)]


@pytest.fixture
def full_pool(fleet):
    """pool-a with a 0.0001 % safety margin: deliverable 279.99972 CU, 280.000 at CU precision, the
    figure approvals compare in; sold exactly that."""
    pool = fleet.pool_a
    pool.safety_pct = 0.0001
    pool.save()
    entitlement_grant(actor=fleet.operator, reason="test", **grant_kwargs(pool, fleet.acme, "280", start=END, days=400))
    return fleet


def _flat_demand(pool, level: float) -> ForecastRun:
    run = ForecastRun.objects.create(status="succeeded", progress=100)
    PoolDemand.objects.create(
        run=run,
        pool=pool,
        start=END,
        tenants={"acme": 1.0},
        hourly={k: [level] * (WEEKS * H) for k in gap.FORECAST_SCENARIOS},
    )
    return run


def test_a_pool_sold_exactly_to_its_deliverable_raises_no_alarm(full_pool):
    p = _pool(_flat_demand(full_pool.pool_a, 100.0))
    assert (p["weeks"][0]["healthy_cu"], p["weeks"][0]["committed_cu"]) == (280.0, 280.0)
    assert _without_order(p["gaps"]["committed"]["healthy"]) == {
        "first_week": None,
        "order_by": None,
        "late": False,
        "max_gap_cu": 0.0,
        "replicas_short": 0,
    }


def test_demand_is_rounded_to_the_same_cu_as_supply(full_pool):
    # 280.0004 CU is 280.000 at CU precision: exactly full, no alarm
    assert _pool(_flat_demand(full_pool.pool_a, 280.0004))["gaps"]["expected"]["healthy"]["first_week"] is None
    # 280.0006 CU is 280.001: one thousandth of a CU short healthy; the order covers it after a zone
    # loss too (5 + 5 replicas: 350 CU left), where 5 + 4 would keep 280.000
    g = _pool(_flat_demand(full_pool.pool_a, 280.0006))["gaps"]["expected"]["healthy"]
    assert (g["first_week"], g["max_gap_cu"], g["replicas_short"]) == (TODAY, 0.001, 6)
