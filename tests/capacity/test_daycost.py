"""capacity.daycost and capacity.diurnal: a day of demand, costed hour by hour."""

from __future__ import annotations

import pytest

from capacity.cost import CloudAccelerator, CostInputs, PurchasedAccelerator
from capacity.daycost import HourDemand, day_cost, minimum_billing_extra_hours
from capacity.diurnal import hourly_rates, size_day
from capacity.input_errors import SizingInputError
from capacity.sizing import AcceleratorSpec
from tests.capacity.test_sizing import make_input

NIGHT_DAY = [1] * 12 + [3] * 12


def hours(needed):
    # 1,000 output tokens/s per replica needed, demand 8,000 wt/s per replica (fully loaded)
    return [HourDemand(h, float(n), n, 8000.0 * n, 1000.0 * n, 0.0) for h, n in enumerate(needed)]


def test_cloud_follows_demand_down_to_the_floor():
    # 12 h × 1 + 12 h × 3 = 48 replica-hours × 2.0 = 96/day
    # useful tokens: (12 × 1,000 + 12 × 3,000) × 3,600 × 0.99 = 171,072,000 → 96 / 171.072 = 0.56116 per M
    day = day_cost(
        hours(NIGHT_DAY),
        accelerator=CloudAccelerator(on_demand_per_hour=2.0),
        inputs=CostInputs(),
        accelerators_per_replica=1,
        chips_per_slice=1,
        goodput_wt_per_replica=8000,
        floor_replicas=1,
    )
    assert day.cost_per_day.value == pytest.approx(96.0)
    assert day.useful_output_tokens_per_day == pytest.approx(171_072_000)
    assert day.per_million_useful_output_tokens.value == pytest.approx(96 / 171.072)
    assert (day.replica_hours_paid, day.replica_hours_needed, day.peak_replicas) == (48, 48, 3)
    assert [r.replicas_paid for r in day.rows] == NIGHT_DAY
    assert day.rows[0].cost == pytest.approx(2.0)
    assert day.rows[23].cost == pytest.approx(6.0)
    assert day.rows[0].load_fraction == pytest.approx(1.0)


def test_purchased_pays_the_peak_all_day():
    # 3 owned replicas × 24 h × 1.0/h = 72; energy: 0.5 kW busy, 0.1 idle, 0.2/kWh, fully loaded
    # replicas that are on: 12 h × 1 + 12 h × 3 = 48 replica-hours × 0.5 kW × 0.2 = 4.8 → 76.8/day
    day = day_cost(
        hours(NIGHT_DAY),
        accelerator=PurchasedAccelerator(price=8760, depreciation_years=1),
        inputs=CostInputs(
            power_kw_busy_per_accelerator=0.5, power_kw_idle_per_accelerator=0.1, electricity_per_kwh=0.2
        ),
        accelerators_per_replica=1,
        chips_per_slice=1,
        goodput_wt_per_replica=8000,
        floor_replicas=0,
    )
    assert day.cost_per_day.value == pytest.approx(76.8)
    assert day.replica_hours_paid == 72
    assert [r.replicas_paid for r in day.rows] == [3] * 24


def test_reserved_floor_and_on_demand_burst():
    # floor 1 at 1.0/h reserved all day = 24; 2 extra replicas × 12 h × 3.0 on demand = 72 → 96
    day = day_cost(
        hours(NIGHT_DAY),
        accelerator=CloudAccelerator(on_demand_per_hour=3.0, reserved_per_hour=1.0, commitment="reserved"),
        inputs=CostInputs(),
        accelerators_per_replica=1,
        chips_per_slice=1,
        goodput_wt_per_replica=8000,
        floor_replicas=1,
    )
    assert day.cost_per_day.value == pytest.approx(96.0)


def test_minimum_billing_interval():
    # Replicas 2 and 3 run 12 h but are billed at least 16 h each: 2 × 4 extra hours × 2.0 = 16 → 96 + 16 = 112
    day = day_cost(
        hours(NIGHT_DAY),
        accelerator=CloudAccelerator(on_demand_per_hour=2.0, minimum_billing_hours=16),
        inputs=CostInputs(),
        accelerators_per_replica=1,
        chips_per_slice=1,
        goodput_wt_per_replica=8000,
        floor_replicas=1,
    )
    assert day.minimum_billing_surcharge == pytest.approx(16.0)
    assert day.cost_per_day.value == pytest.approx(112.0)
    # charged to hour 12, where both runs start
    assert day.rows[12].cost == pytest.approx(6.0 + 16.0)


def test_minimum_billing_runs_wrap_around_midnight_and_cap_at_a_day():
    needed = [2] * 3 + [1] * 18 + [2] * 3  # one 6-hour run over midnight for the 2nd replica
    assert sum(minimum_billing_extra_hours(needed, 1, 4)) == 0
    extra = minimum_billing_extra_hours(needed, 1, 30)
    assert sum(extra) == pytest.approx(18)  # billed min(30, 24) = 24 h for 6 h used
    assert extra[21] == pytest.approx(18)


def test_day_cost_rejects_bad_shape():
    with pytest.raises(SizingInputError) as e:
        day_cost(
            hours([1] * 23),
            accelerator=CloudAccelerator(on_demand_per_hour=1),
            inputs=CostInputs(),
            accelerators_per_replica=1,
            chips_per_slice=1,
            goodput_wt_per_replica=1,
            floor_replicas=0,
        )
    assert e.value.field == "hourly"


def test_hourly_rates():
    assert hourly_rates(10, hourly_multipliers=[0.5] * 24, hourly_rps=None) == [5.0] * 24
    assert hourly_rates(10, hourly_multipliers=None, hourly_rps=[3] * 24) == [3.0] * 24
    with pytest.raises(SizingInputError) as e:
        hourly_rates(10, hourly_multipliers=[1] * 23 + [-1], hourly_rps=None)
    assert e.value.field == "hourly_multipliers[23]"
    with pytest.raises(SizingInputError):
        hourly_rates(10, hourly_multipliers=None, hourly_rps=None)


def test_size_day_scales_down_at_night():
    # Night 0.1 × 10 req/s: demand 1,800 wt/s → 1 replica; day 10 req/s → 4 replicas (class 1 of test_sizing).
    # No failure policy, no startup reserve → floor defaults to 0.
    # Cloud 2.0/h: 12 × 1 + 12 × 4 = 60 replica-hours = 120/day
    # useful (12 × 200 + 12 × 2,000) × 3,600 × 0.99 = 94,089,600 → 120 / 94.0896 = 1.27538 per M
    inp = make_input(accelerators=(AcceleratorSpec("a", memory_gb=80, cost=CloudAccelerator(on_demand_per_hour=2.0)),))
    day, peak = size_day(inp, hourly_multipliers=[0.1] * 12 + [1.0] * 12, sim_requests=1000)
    assert peak.replicas.total == 4
    assert [r.replicas_provisioned for r in day.rows] == [1] * 12 + [4] * 12
    assert day.cost_per_day.value == pytest.approx(120.0)
    assert day.per_million_useful_output_tokens.value == pytest.approx(120 / 94.0896)
    # Fully loaded at peak: 8.0/h ÷ 7.128 M/h = 1.1223 per M — cheaper than the day's 1.2754.
    assert peak.cost.per_million_useful_output_tokens < day.per_million_useful_output_tokens


def test_size_day_keeps_the_reserve_at_night():
    # zone over 3: peak steady 4 → 6 with failure, reserve 2 stays up → night provisioned max(2, 2) = 2
    inp = make_input(failure_policy="zone", zones=3)
    day, peak = size_day(inp, hourly_multipliers=[0.1] * 12 + [1.0] * 12, sim_requests=1000)
    assert (peak.replicas.steady, peak.replicas.total) == (4, 6)
    assert day.floor_replicas == 2
    assert [r.replicas_provisioned for r in day.rows] == [2] * 12 + [6] * 12
