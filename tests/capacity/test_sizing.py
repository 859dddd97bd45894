"""capacity.sizing: five request classes worked by hand, and input validation.

Shared setup (below; other test files import `make_input`): goodput 8,000 wt/s per replica (1,000 tok/s × (4 + 1,000/250)),
w_out 4, w_cached 0, R 1,000 wt/s, TTFT 1 s and TPOT 0.05 s (measured p99), 70 M KV tokens per replica,
accelerator 2.00/h on demand, SLO met 0.99.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from capacity.cost import CloudAccelerator, CostInputs, PurchasedAccelerator
from capacity.sizing import (
    AcceleratorSpec,
    LengthQuantiles,
    LengthSamples,
    ModelSpec,
    OperatingPoint,
    SizingInput,
    SizingInputError,
    Slo,
    size,
)
from capacity.units import ReferenceMix

# KV 1,000 bytes/token; 80 GB − 10 GB weights = 70 GB → 70,000,000 KV tokens per replica.
MODEL = ModelSpec("m", kv_bytes_per_token=1000, context_length=100_000, weights_gb=10, r_wt_per_s=1000)
ACC = AcceleratorSpec("a", memory_gb=80, cost=CloudAccelerator(on_demand_per_hour=2.0))
# goodput = 1,000 × (4 + 1,000 / 250) = 8,000 wt/s per replica; residence uses 1 s TTFT, 50 ms TPOT.
POINT = OperatingPoint("p", "a", 1, 1000, ReferenceMix(1000, 250), 2.0, 0.1, 1.0, 0.05)


def make_input(**kw: object) -> SizingInput:
    """A request class on the shared setup; keyword arguments replace fields (other test files reuse it)."""
    base = SizingInput(
        model=MODEL,
        operating_points=(POINT,),
        accelerators=(ACC,),
        arrival_rate_rps=10.0,
        prompt_tokens=LengthQuantiles(mean=1000, p50=800, p95=2000, p99=3000),
        output_tokens=LengthQuantiles(mean=200, p50=150, p95=400, p99=600),
        slo=Slo(2.0, 0.1),
        sim_requests=4000,
    )
    return replace(base, **kw)


def test_class_1_plain_chat():
    # 10 req/s, mean prompt 1,000, mean output 200, no cache, no cancellation, util 0.7, no failure.
    # input 10 × 1,000 = 10,000 tok/s; output 10 × 200 = 2,000 tok/s
    # residence 1 + 200 × 0.05 = 11 s; concurrency 10 × 11 = 110
    # demand 10,000 + 4 × 2,000 = 18,000 wt/s = 18 CU; replicas ⌈18,000 / (8,000 × 0.7)⌉ = ⌈3.21⌉ = 4
    # network 10 × ((1,000 + 200) × 4 + 1,024) = 58,240 B/s
    # cost 4 × 2.00 = 8.00/h; useful 2,000 × 3,600 × 0.99 = 7,128,000/h → 8 / 7.128 = 1.1223 per M
    r = size(make_input())
    assert r.input_tokens_per_s == 10_000
    assert r.uncached_input_tokens_per_s == 10_000
    assert r.output_tokens_per_s == 2_000
    assert r.mean_residence_s == pytest.approx(11.0)
    assert r.mean_concurrency == pytest.approx(110.0)
    assert r.prefill_concurrency == pytest.approx(10.0)
    assert r.decode_concurrency == pytest.approx(100.0)
    assert r.demand_wt_per_s == 18_000
    assert r.capacity_units == pytest.approx(18.0)
    assert r.goodput_wt_per_s_per_replica == 8_000
    assert r.goodput_cu_per_replica == 8
    assert r.network_bytes_per_s == pytest.approx(58_240)
    assert (r.replicas.for_load, r.replicas.for_kv) == (4, 1)
    assert (r.replicas.steady, r.replicas.with_failure, r.replicas.startup_reserve, r.replicas.total) == (4, 4, 0, 4)
    assert r.accelerators == 4
    assert r.kv_capacity_tokens_per_replica == 70_000_000
    assert r.kv_bytes_p99 == r.kv_tokens_p99 * 1000
    assert r.kv_fits is True
    assert r.cost.per_hour.value == pytest.approx(8.0)
    assert r.cost.per_million_useful_output_tokens.value == pytest.approx(8 / 7.128)
    assert r.cost.marginal_per_million_output_tokens.value == 0
    assert r.operating_point_used.label == "p"
    assert r.failure_policy == "none"


def test_class_2_cache_cancellation_and_zone_failure():
    # 20 req/s, prompt 2,000, output 300, cache hit 0.5, cancellation 0.2, zone failure over 3 zones.
    # output per request 300 × (1 − 0.2 / 2) = 270
    # input 40,000; uncached 40,000 × 0.5 = 20,000; output 20 × 270 = 5,400 tok/s
    # residence 1 + 270 × 0.05 = 14.5 s; concurrency 20 × 14.5 = 290
    # demand 20,000 + 0 × 20,000 + 4 × 5,400 = 41,600 wt/s = 41.6 CU
    # steady ⌈41,600 / 5,600⌉ = ⌈7.43⌉ = 8; zone: ⌈8 × 3 / 2⌉ = 12
    r = size(
        make_input(
            arrival_rate_rps=20.0,
            prompt_tokens=LengthQuantiles(mean=2000, p50=1500, p95=5000, p99=8000),
            output_tokens=LengthQuantiles(mean=300, p50=250, p95=700, p99=900),
            cache_hit_ratio=0.5,
            cancellation_ratio=0.2,
            failure_policy="zone",
            zones=3,
        )
    )
    assert r.input_tokens_per_s == 40_000
    assert r.uncached_input_tokens_per_s == 20_000
    assert r.output_tokens_per_s == pytest.approx(5_400)
    assert r.mean_residence_s == pytest.approx(14.5)
    assert r.mean_concurrency == pytest.approx(290)
    assert r.capacity_units == pytest.approx(41.6)
    assert (r.replicas.steady, r.replicas.with_failure, r.replicas.total) == (8, 12, 12)
    assert r.failure_policy == "zone"
    assert any("generate on average half their output" in a for a in r.assumptions)


def test_class_3_uneven_balancing_replica_failure_and_startup_reserve():
    # 5 req/s, prompt 500, output 100, utilization 0.5, unevenness 1.25, replica:2, 10 min startup at 0.5 req/s/min.
    # input 2,500, output 500 tok/s; residence 1 + 100 × 0.05 = 6 s; concurrency 30
    # demand 2,500 + 4 × 500 = 4,500 wt/s; steady ⌈4,500 / (8,000 × 0.5) × 1.25⌉ = ⌈1.406⌉ = 2
    # with failure 2 + 2 = 4
    # startup: 0.5 × 10 = 5 req/s extra × (500 + 4 × 100 = 900 wt) = 4,500 wt/s → ⌈4,500 / 4,000 × 1.25⌉ = 2
    # total 4 + 2 = 6
    r = size(
        make_input(
            arrival_rate_rps=5.0,
            prompt_tokens=LengthQuantiles(mean=500, p50=400, p95=1200, p99=2000),
            output_tokens=LengthQuantiles(mean=100, p50=80, p95=250, p99=400),
            utilization_target=0.5,
            lb_unevenness=1.25,
            failure_policy="replica:2",
            startup_minutes=10,
            ramp_rps_per_minute=0.5,
        )
    )
    assert r.mean_residence_s == pytest.approx(6.0)
    assert r.mean_concurrency == pytest.approx(30.0)
    assert r.demand_wt_per_s == 4_500
    assert r.replicas.to_dict() == {
        "steady": 2,
        "with_failure": 4,
        "startup_reserve": 2,
        "total": 6,
        "for_load": 2,
        "for_kv": 1,
    }
    assert r.accelerators == 6
    # cost 6 × 2.00 = 12/h, of which (6 − 2) / 6 of the accelerators idle → 8/h idle reserve
    assert r.cost.per_hour.value == pytest.approx(12.0)
    assert r.cost.idle_reserve_per_hour == pytest.approx(8.0)


def test_class_4_trace_replay_where_kv_memory_binds():
    # Arrivals every second (0 … 9 s, replayed on a 10 s circle), each 90 prompt + 10 output tokens,
    # TTFT 0.5 s, TPOT 0.1 s → residence 0.5 + 10 × 0.1 = 1.5 s, KV 100 tokens per request.
    # Two requests overlap half the time → KV p99 = 200 tokens, mean concurrency 1 × 1.5 = 1.5.
    # KV 2.5 MB/token; 0.5 GB − 0.25 GB weights = 0.25 GB → 100 tokens per replica → ⌈200 / 100⌉ = 2 replicas,
    # while load needs ⌈(90 + 4 × 10) / 5,600⌉ = 1.
    model = ModelSpec("tiny", kv_bytes_per_token=2.5e6, context_length=4096, weights_gb=0.25, r_wt_per_s=100)
    acc = AcceleratorSpec("a", memory_gb=0.5)
    point = OperatingPoint("p2", "a", 1, 1000, ReferenceMix(1000, 250), 1.0, 0.2, 0.5, 0.1)
    r = size(
        make_input(
            model=model,
            accelerators=(acc,),
            operating_points=(point,),
            arrival_rate_rps=1.0,
            prompt_tokens=LengthSamples.of([90] * 10),
            output_tokens=LengthSamples.of([10] * 10),
            arrival_times_s=np.arange(10, dtype=float),
        )
    )
    assert r.mean_residence_s == pytest.approx(1.5)
    assert r.kv.mean_concurrency == pytest.approx(1.5)
    assert r.kv_tokens_p99 == 200
    assert r.kv.kv_tokens_p50 == 100
    assert r.kv_bytes_p99 == 5e8
    assert r.kv_capacity_tokens_per_replica == 100
    assert (r.replicas.for_load, r.replicas.for_kv, r.replicas.steady) == (1, 2, 2)
    assert r.kv_tokens_p99_per_replica == 100
    assert r.kv_fits is True
    assert r.capacity_units == pytest.approx(1.3)
    assert r.kv.source == "trace"


def test_class_5_ceiling_allowed_purchased_hardware_fraction_failure():
    # The only measured point misses TTFT 1 s; allow_ceiling picks the 2,000 tok/s ceiling (8 GPUs, one slice).
    # residence from the SLO: 1 + 100 × 0.04 = 5 s; concurrency 2 × 5 = 10
    # goodput 2,000 × (4 + 4) = 16,000 wt/s; demand 2 × 400 + 4 × 2 × 100 = 1,600 wt/s
    # steady ⌈1,600 / 11,200⌉ = 1; fraction:0.5 → 2 (2 − ⌈1⌉ = 1); accelerators 2 × 8 = 16
    # accelerator 35,040 / (4 × 8,760) + 876 / 8,760 = 1.1/h; host 0.5/h
    # energy: idle 16 × 0.4 kW × 1.5 PUE × 0.1 = 0.96/h; load 1,600 / 32,000 = 0.05 →
    #   16 × 0.6 × 0.05 × 0.15 = 0.072/h
    # per hour 16 × 1.1 + 16 × 0.5 + 0.96 + 0.072 = 26.632
    # useful 2 × 100 × 3,600 × 0.99 = 712,800/h → 26.632 / 0.7128 = 37.3625… per M
    # marginal: 8 × 0.6 kW × 0.15 = 0.72/h ÷ (2,000 × 3,600 / 1M = 7.2) = 0.1 per M
    # idle reserve: (16 − 8) / 16 × (16 × 1.6 + 0.96) = 13.28/h
    measured = OperatingPoint("slow", "g", 8, 3000, ReferenceMix(1000, 250), 2.0, 0.2, 3.0, 0.03)
    ceiling = OperatingPoint("offline", "g", 8, 2000, ReferenceMix(1000, 250), is_ceiling=True)
    acc = AcceleratorSpec(
        "g",
        memory_gb=80,
        cost=PurchasedAccelerator(price=35_040, depreciation_years=4, maintenance_per_year=876),
        chips_per_slice=8,
    )
    r = size(
        make_input(
            operating_points=(measured, ceiling),
            accelerators=(acc,),
            arrival_rate_rps=2.0,
            prompt_tokens=LengthQuantiles(mean=400, p50=300, p95=1000, p99=1500),
            output_tokens=LengthQuantiles(mean=100, p50=80, p95=250, p99=400),
            slo=Slo(1.0, 0.04),
            allow_ceiling=True,
            failure_policy="fraction:0.5",
            cost_inputs=CostInputs(
                host_per_accelerator_hour=0.5,
                power_kw_busy_per_accelerator=1.0,
                power_kw_idle_per_accelerator=0.4,
                pue=1.5,
                electricity_per_kwh=0.1,
            ),
        )
    )
    assert r.operating_point_used is ceiling
    assert any("throughput ceiling" in a for a in r.assumptions)
    assert (r.ttft_s, r.tpot_s) == (1.0, 0.04)
    assert r.mean_residence_s == pytest.approx(5.0)
    assert r.mean_concurrency == pytest.approx(10.0)
    assert r.demand_wt_per_s == 1_600
    assert (r.replicas.steady, r.replicas.with_failure, r.replicas.total) == (1, 2, 2)
    assert r.accelerators == 16
    assert r.cost.per_hour.value == pytest.approx(26.632)
    assert r.cost.per_million_useful_output_tokens.value == pytest.approx(26.632 / 0.7128)
    assert r.cost.marginal_per_million_output_tokens.value == pytest.approx(0.1)
    assert r.cost.idle_reserve_per_hour == pytest.approx(13.28)
    assert r.cost.marginal_per_million_output_tokens.basis == "marginal"
    assert r.cost.per_million_useful_output_tokens.basis == "fully_loaded"


def test_class_6_zero_rate_needs_only_the_startup_reserve():
    # 0 req/s: every rate 0, no KV; startup 5 min × 1 req/s/min = 5 req/s × 1,800 wt (1,000 + 4 × 200)
    # = 9,000 wt/s → ⌈9,000 / 5,600⌉ = 2 replicas
    r = size(make_input(arrival_rate_rps=0.0, startup_minutes=5, ramp_rps_per_minute=1))
    assert (r.input_tokens_per_s, r.output_tokens_per_s, r.mean_concurrency, r.kv_tokens_p99) == (0, 0, 0, 0)
    assert (r.replicas.steady, r.replicas.startup_reserve, r.replicas.total) == (0, 2, 2)
    assert math.isinf(r.cost.per_million_useful_output_tokens.value)
    assert r.to_dict()["cost"]["per_million_useful_output_tokens"] is None  # type: ignore[index]


def test_steps_show_the_formula_with_numbers():
    r = size(make_input())
    steps = {s.name: s for s in r.steps}
    assert steps["mean concurrency"].formula == "110 = 10 req/s × 11 s"
    assert steps["mean residence"].formula == "11 s = TTFT 1 s + 200 tokens × TPOT 0.05 s"
    assert steps["replicas for load"].formula == "4 = ⌈18,000 wt/s ÷ (8,000 wt/s × utilization 0.7) × unevenness 1⌉"
    assert steps["demand"].value == 18_000
    assert steps["total replicas"].value == 4


def test_to_dict_has_every_contract_field():
    d = size(make_input()).to_dict()
    for key in (
        "input_tokens_per_s",
        "uncached_input_tokens_per_s",
        "output_tokens_per_s",
        "mean_residence_s",
        "mean_concurrency",
        "kv_tokens_p99",
        "kv_bytes_p99",
        "network_bytes_per_s",
        "capacity_units",
        "replicas",
        "accelerators",
        "cost",
        "assumptions",
        "operating_point_used",
        "steps",
        "kv_simulation",
    ):
        assert key in d
    assert set(d["replicas"]) >= {"steady", "with_failure", "startup_reserve", "total"}  # type: ignore[arg-type]
    assert set(d["cost"]) >= {"per_hour", "per_million_useful_output_tokens", "marginal_per_million_output_tokens"}  # type: ignore[arg-type]


def test_seeded_and_repeatable():
    a, b = size(make_input(seed=7)), size(make_input(seed=7))
    assert a.kv_tokens_p99 == b.kv_tokens_p99
    assert a.kv.hist_time_fraction.tolist() == b.kv.hist_time_fraction.tolist()


def test_largest_request_that_cannot_fit_is_flagged():
    # 0.25 GB free at 2.5 MB/token = 100 tokens, but a request holds up to 3,000 + 600 tokens.
    model = ModelSpec("tiny", kv_bytes_per_token=2.5e6, context_length=100_000, weights_gb=0.25, r_wt_per_s=100)
    r = size(make_input(model=model, accelerators=(AcceleratorSpec("a", memory_gb=0.5),)))
    assert r.kv_fits is False
    assert any(a.startswith("WARNING: the largest simulated request") for a in r.assumptions)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"arrival_rate_rps": -1.0}, "arrival_rate_rps"),
        ({"arrival_rate_rps": float("nan")}, "arrival_rate_rps"),
        ({"prompt_tokens": LengthQuantiles(mean=100, p50=500, p95=400, p99=300)}, "prompt_tokens.p50"),
        ({"output_tokens": LengthQuantiles(mean=100, p50=50, p95=400, p99=300)}, "output_tokens.p95"),
        ({"cache_hit_ratio": 1.5}, "cache_hit_ratio"),
        ({"cache_hit_ratio": -0.1}, "cache_hit_ratio"),
        ({"cancellation_ratio": 2.0}, "cancellation_ratio"),
        ({"utilization_target": 0.0}, "utilization_target"),
        ({"lb_unevenness": 0.9}, "lb_unevenness"),
        ({"failure_policy": "rack:1"}, "failure_policy"),
        ({"failure_policy": "zone", "zones": 1}, "zones"),
        ({"zones": 0}, "zones"),
        ({"startup_minutes": -1.0}, "startup_minutes"),
        ({"ramp_rps_per_minute": -1.0}, "ramp_rps_per_minute"),
        ({"slo": Slo(0.0, 0.1)}, "slo.ttft_p99_s"),
        ({"slo": Slo(0.1, 0.01)}, "slo"),
        ({"accelerators": ()}, "accelerator"),
        ({"operating_points": ()}, "operating_points"),
        ({"arrival_times_s": np.array([1.0])}, "arrival_times_s"),
        (
            {"arrival_times_s": np.arange(3.0), "prompt_tokens": LengthSamples.of([1, 2])},
            "arrival_times_s",
        ),
        ({"cost_inputs": CostInputs(pue=0.5)}, "cost_inputs.pue"),
        ({"model": ModelSpec("m", 0, 1000, 1, 1)}, "model.kv_bytes_per_token"),
        ({"model": ModelSpec("m", 1000, 1000, 500, 1)}, "model.weights_gb"),
    ],
)
def test_bad_input_names_the_field(kw, field):
    with pytest.raises(SizingInputError) as e:
        size(make_input(**kw))
    assert e.value.field == field


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"arrival_rate_rps": 0.0},
        {"arrival_times_s": np.arange(5.0), "prompt_tokens": LengthSamples.of([5, 6, 7, 8, 9])},
    ],
)
def test_to_dict_is_strict_json(kw):
    import json

    text = json.dumps(size(make_input(**kw)).to_dict(), allow_nan=False)
    assert json.loads(text)["accelerators"] == size(make_input(**kw)).accelerators


def test_littles_law_step_for_a_sampled_class():
    # 4 equal samples of 100 prompt / 20 output: residence 1 + 20 × 0.05 = 2 s; 5 req/s × 2 s = 10
    r = size(
        make_input(
            arrival_rate_rps=5.0, prompt_tokens=LengthSamples.of([100] * 4), output_tokens=LengthSamples.of([20] * 4)
        )
    )
    step = next(s for s in r.steps if s.name == "simulated mean concurrency")
    assert step.value == pytest.approx(10.0)
    assert step.formula.endswith("Little's law check: 5 req/s × 2 s simulated mean residence = 10")
