"""Issue 15.3, by hand: what a model can hold (context, weights copies) and compute (prefill), and
the warnings that say so."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from capacity.cost import CloudAccelerator
from capacity.sizing import (
    AcceleratorSpec,
    LengthQuantiles,
    LengthSamples,
    ModelSpec,
    OperatingPoint,
    SizingInput,
    Slo,
    kv_capacity_tokens,
    size,
)
from capacity.units import ReferenceMix
from tests.capacity.test_sizing import make_input

H100 = AcceleratorSpec("h100", memory_gb=80, cost=CloudAccelerator(on_demand_per_hour=2.0), dense_tflops=989)
SEVENTY_B = ModelSpec(
    "70b", kv_bytes_per_token=327_680, context_length=32_768, weights_gb=140, r_wt_per_s=1000, active_params_b=70
)
# 20,000 out tok/s on a 2,000 / 100 mix → goodput 20,000 × (4 + 20) = 480,000 wt/s per 8-GPU replica.
EIGHT = OperatingPoint("8× h100", "h100", 8, 20_000, ReferenceMix(2000, 100), 2.0, 0.1, 1.0, 0.05)


def prompt_heavy(**kw: object) -> SizingInput:
    """10 req/s of 20,000 prompt and 10 output tokens: 200,000 uncached prompt tokens/s."""
    base = SizingInput(
        model=SEVENTY_B,
        operating_points=(EIGHT,),
        accelerators=(H100,),
        arrival_rate_rps=10,
        prompt_tokens=LengthQuantiles(20_000, 20_000, 20_000, 20_000),
        output_tokens=LengthQuantiles(10, 10, 10, 10),
        slo=Slo(2.0, 0.1),
        sim_requests=2000,
    )
    return replace(base, **kw)


def test_prefill_bound_sizes_on_compute_and_warns():
    # Bound: 8 × 989e12 FLOP/s × MFU 0.5 ÷ (2 × 70e9) = 28,257.14 prompt tokens/s per replica.
    # Weighted tokens: 200,000 + 4 × 100 = 200,400 wt/s ÷ (480,000 × 0.7) → 1 replica for load.
    # Prefill: ⌈200,000 ÷ (28,257.14 × 0.7)⌉ = ⌈10.11⌉ = 11 replicas.
    r = size(prompt_heavy())
    assert r.replicas.for_load == 1
    assert r.replicas.steady == 11
    assert r.accelerators == 88
    steps = {s.name: s for s in r.steps}
    assert steps["replicas for prefill"].value == 11
    assert steps["replicas for prefill"].formula.startswith(
        "28,257 prompt tokens/s per replica = 8 × 989 TFLOP/s dense × MFU 0.5 ÷ (2 × 70B active parameters)"
    )
    assert [w.code for w in r.warnings] == ["PREFILL_BOUND"]
    assert r.warnings[0].message.startswith("prompt processing needs 11 replicas, more than the 1 the weighted-token")


def test_a_higher_mfu_setting_needs_fewer_prefill_replicas():
    # MFU 0.9: 50,862.86 tokens/s per replica → ⌈200,000 ÷ 35,604⌉ = ⌈5.617⌉ = 6.
    assert size(prompt_heavy(prefill_mfu=0.9)).replicas.steady == 6


def test_no_bound_without_the_figures_and_the_assumptions_say_so():
    r = size(prompt_heavy(model=replace(SEVENTY_B, active_params_b=None)))
    assert r.replicas.steady == 1
    assert r.warnings == ()
    assert (
        r.assumptions[-1]
        == "prefill: no compute bound (the catalogue lacks h100's dense FLOP/s or 70b's active parameters)"
    )


def test_context_exceeded_is_the_share_of_requests_over_the_context():
    # Context 4,096: 80 requests of 1,000 + 100 fit; 6 of 4,000 + 100 = 4,100 and 14 of 5,000 + 100 do not → 20 %.
    prompts = [1000] * 80 + [4000] * 6 + [5000] * 14
    r = size(
        make_input(
            model=replace(make_input().model, context_length=4096),
            prompt_tokens=LengthSamples.of(prompts),
            output_tokens=LengthSamples.of([100] * 100),
            arrival_times_s=np.arange(100, dtype=float),
        )
    )
    assert [(w.code, w.share) for w in r.warnings] == [("CONTEXT_EXCEEDED", 0.2)]
    assert r.warnings[0].message.startswith("20.0% of the trace's requests (20 of 100) need more than the model's")
    assert r.to_dict()["warnings"][0] == {"code": "CONTEXT_EXCEEDED", "message": r.warnings[0].message, "share": 0.2}


def test_implausible_residence_and_fleet():
    # 100,000 output tokens × 50 ms = 5,000 s a request; the class needs more GPUs than a 4-GPU fleet.
    r = size(
        make_input(
            output_tokens=LengthQuantiles(100_000, 100_000, 100_000, 100_000),
            fleet_accelerators={"a": 4},
            arrival_rate_rps=1,
        )
    )
    codes = [(w.code, w.message.split(":")[0][:40]) for w in r.warnings]
    assert ("IMPLAUSIBLE", "a request stays 5,001 s, over an hour") in codes
    assert any(
        w.code == "IMPLAUSIBLE" and "more than the whole catalogue fleet has (4)" in w.message for w in r.warnings
    )


def test_instances_per_replica_take_one_copy_of_the_weights_each():
    # 8 × 80 GB − 8 copies × 16 GB = 512 GB ÷ 131,072 B/token = 3,906,250 tokens.
    eight_b = ModelSpec("8b", kv_bytes_per_token=131_072, context_length=8192, weights_gb=16, r_wt_per_s=1000)
    assert kv_capacity_tokens(eight_b, H100, 8, 8) == 3_906_250
    assert kv_capacity_tokens(eight_b, H100, 8, 1) == 4_760_742  # (640 − 16) GB ÷ 131,072 B
    with pytest.raises(Exception, match="9 copies of weights 80 GB do not fit in 8 × 80 GB"):
        kv_capacity_tokens(replace(eight_b, weights_gb=80), H100, 8, 9)
