"""capacity.cost: fully loaded vs marginal, and the guard between them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity.cost import (
    CloudAccelerator,
    CostBasisError,
    CostFigure,
    CostInputs,
    PurchasedAccelerator,
    accelerators_for,
    compare_costs,
    pool_cost,
)
from capacity.input_errors import SizingInputError


def test_purchased_per_hour():
    # 26,280 / (3 years × 8,760 h × 0.5) = 2.0/h; + 4,380 / 8,760 = 0.5/h → 2.5/h
    acc = PurchasedAccelerator(price=26_280, depreciation_years=3, lifetime_utilization=0.5, maintenance_per_year=4_380)
    assert acc.per_hour() == pytest.approx(2.5)
    assert acc.explain() == (
        "price 26,280 ÷ (3 years × 8,760 h × 0.5 lifetime utilization) + maintenance 4,380/year ÷ 8,760 h"
    )


def test_cloud_per_hour_by_commitment():
    assert CloudAccelerator(on_demand_per_hour=4.0, reserved_per_hour=2.5).per_hour() == 4.0
    reserved = CloudAccelerator(on_demand_per_hour=4.0, reserved_per_hour=2.5, commitment="reserved")
    assert reserved.per_hour() == 2.5
    assert reserved.explain() == "reserved 1-year term rate 2.5/h"


def test_cost_figures_compare_only_on_the_same_basis():
    a = CostFigure(1.0, "per 1M output tokens", "fully_loaded")
    b = CostFigure(2.0, "per 1M output tokens", "fully_loaded")
    m = CostFigure(0.1, "per 1M output tokens", "marginal")
    assert a < b
    assert b >= a
    assert compare_costs(a, b) == -1
    assert compare_costs(b, a) == 1
    assert compare_costs(a, a) == 0
    with pytest.raises(CostBasisError, match="cannot compare a marginal cost with a fully_loaded cost"):
        compare_costs(m, a)
    with pytest.raises(CostBasisError):
        _ = m < b
    with pytest.raises(CostBasisError, match="per hour"):
        compare_costs(a, CostFigure(1.0, "per hour", "fully_loaded"))
    with pytest.raises(CostBasisError):
        compare_costs(a, CostFigure(1.0, "per 1M output tokens", "fully_loaded", currency="EUR"))


def test_pool_cost_every_line_by_hand():
    # 10 accelerators (5 replicas × 2) at 3.0/h cloud, host 0.2, software 0.3, storage 0.1/replica,
    # power 0.7 busy / 0.2 idle kW, PUE 1.25, 0.2/kWh, network 0.05/GB, load 0.5, 3 steady replicas.
    # accelerators 30; hosts 2; software 3; storage 0.5; idle energy 10 × 0.2 × 0.25 = 0.5;
    # load energy 10 × 0.5 × 0.5 × 0.25 = 0.625; network 1e6 B/s × 3,600 / 1e9 = 3.6 GB/h × 0.05 = 0.18
    # per hour = 30 + 2 + 3 + 0.5 + 0.5 + 0.625 + 0.18 = 36.805
    # useful 1,000 tok/s × 3,600 × 0.9 × (1 − 0.1) = 2,916,000/h → 36.805 / 2.916 = 12.6217 per M
    # idle reserve: (10 − 6) / 10 × (10 × 3.5 + 0.5) + (5 − 3) / 5 × 0.5 = 14.2 + 0.2 = 14.4
    # marginal: 2 × 0.5 kW × 0.25 = 0.25/h ÷ (500 × 3,600 / 1M = 1.8) = 0.13889
    #   + network 1,000 B per output token / 1e9 × 0.05 × 1e6 = 0.05 → 0.18889
    inputs = CostInputs(
        host_per_accelerator_hour=0.2,
        software_per_accelerator_hour=0.3,
        storage_per_replica_hour=0.1,
        power_kw_busy_per_accelerator=0.7,
        power_kw_idle_per_accelerator=0.2,
        pue=1.25,
        electricity_per_kwh=0.2,
        network_per_gb=0.05,
        slo_met_fraction=0.9,
        retry_waste_fraction=0.1,
    )
    c = pool_cost(
        accelerator=CloudAccelerator(on_demand_per_hour=3.0),
        inputs=inputs,
        accelerators=10,
        accelerators_per_replica=2,
        replicas_total=5,
        replicas_steady=3,
        load_fraction=0.5,
        output_tokens_per_s=1000,
        network_bytes_per_s=1e6,
        out_tps_per_replica=500,
    )
    assert [(line.name, round(line.per_hour, 9)) for line in c.lines] == [
        ("accelerators", 30.0),
        ("hosts", 2.0),
        ("software", 3.0),
        ("storage", 0.5),
        ("energy (idle draw)", 0.5),
        ("energy (load)", 0.625),
        ("network", 0.18),
    ]
    assert c.per_hour.value == pytest.approx(36.805)
    assert c.useful_output_tokens_per_hour == pytest.approx(2_916_000)
    assert c.per_million_useful_output_tokens.value == pytest.approx(36.805 / 2.916)
    assert c.idle_reserve_per_hour == pytest.approx(14.4)
    assert c.marginal_per_million_output_tokens.value == pytest.approx(0.25 / 1.8 + 0.05)
    assert c.per_hour.basis == "fully_loaded"
    assert c.marginal_per_million_output_tokens.basis == "marginal"
    with pytest.raises(CostBasisError):
        compare_costs(c.per_million_useful_output_tokens, c.marginal_per_million_output_tokens)


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        (CostInputs(pue=0.9), "cost_inputs.pue"),
        (CostInputs(slo_met_fraction=0), "cost_inputs.slo_met_fraction"),
        (CostInputs(retry_waste_fraction=1), "cost_inputs.retry_waste_fraction"),
        (CostInputs(network_per_gb=-1), "cost_inputs.network_per_gb"),
        (
            CostInputs(power_kw_busy_per_accelerator=0.1, power_kw_idle_per_accelerator=0.2),
            "cost_inputs.power_kw_idle_per_accelerator",
        ),
    ],
)
def test_bad_cost_inputs(inputs, field):
    with pytest.raises(SizingInputError) as e:
        inputs.validate()
    assert e.value.field == field


@pytest.mark.parametrize(
    ("acc", "field"),
    [
        (PurchasedAccelerator(price=-1, depreciation_years=3), "acc.price"),
        (PurchasedAccelerator(price=1, depreciation_years=0), "acc.depreciation_years"),
        (PurchasedAccelerator(price=1, depreciation_years=3, lifetime_utilization=1.5), "acc.lifetime_utilization"),
        (CloudAccelerator(on_demand_per_hour=1, commitment="reserved"), "acc.reserved_per_hour"),
    ],
)
def test_bad_accelerator_cost(acc, field):
    with pytest.raises(SizingInputError) as e:
        acc.validate("acc")
    assert e.value.field == field


def test_accelerators_come_in_slices():
    assert accelerators_for(3, 2, 1) == 6
    assert accelerators_for(3, 2, 4) == 8
    assert accelerators_for(0, 8, 8) == 0


@given(replicas=st.integers(0, 500), apr=st.integers(1, 16), slice_=st.integers(1, 64))
def test_slices_are_whole_and_enough(replicas, apr, slice_):
    n = accelerators_for(replicas, apr, slice_)
    assert n % slice_ == 0
    assert replicas * apr <= n < replicas * apr + slice_


@given(
    steady=st.integers(1, 50),
    extra=st.integers(0, 50),
    rate=st.floats(0.1, 20),
    load=st.floats(0, 1),
)
def test_more_replicas_never_cost_less(steady, extra, rate, load):
    def hourly(total):
        return pool_cost(
            accelerator=CloudAccelerator(on_demand_per_hour=rate),
            inputs=CostInputs(
                power_kw_busy_per_accelerator=1, power_kw_idle_per_accelerator=0.3, electricity_per_kwh=0.1
            ),
            accelerators=total,
            accelerators_per_replica=1,
            replicas_total=total,
            replicas_steady=steady,
            load_fraction=load * steady / total,
            output_tokens_per_s=100,
            network_bytes_per_s=0,
            out_tps_per_replica=100,
        ).per_hour

    assert hourly(steady + extra) >= hourly(steady)
