"""Issue 15.2, by hand: the cheapest feasible operating point and replica shape wins, not the best
goodput per accelerator. The issue's case: llama-2-70b on B200 at 0.5 req/s, where a TTFT SLO of
0.44 s used to pick a whole 8-GPU replica ($56/h) and 0.40 s one GPU ($7/h)."""

from __future__ import annotations

from dataclasses import replace

from capacity.cost import CloudAccelerator
from capacity.sizing import AcceleratorSpec, LengthQuantiles, ModelSpec, OperatingPoint, SizingInput, Slo, size
from capacity.units import ReferenceMix

MIX = ReferenceMix(684, 283)
B200 = AcceleratorSpec("b200", memory_gb=180, cost=CloudAccelerator(on_demand_per_hour=7.0))
MODEL = ModelSpec("llama-2-70b", kv_bytes_per_token=327_680, context_length=4096, weights_gb=35, r_wt_per_s=1000)
# 99,123 tok/s on 8 GPUs is 12,390 per GPU: the old ranking's favourite; it measured TTFT 0.436 s.
EIGHT = OperatingPoint("8× b200", "b200", 8, 99_123.04, MIX, 2.0, 0.2, 0.436, 0.1324)
ONE = OperatingPoint("1× b200", "b200", 1, 12_000, MIX, 0.45, 0.2, 0.40, 0.1)


def inp(ttft_slo: float, rate: float = 0.5) -> SizingInput:
    return SizingInput(
        model=MODEL,
        operating_points=(EIGHT, ONE),
        accelerators=(B200,),
        arrival_rate_rps=rate,
        prompt_tokens=LengthQuantiles(mean=1000, p50=800, p95=2000, p99=3000),
        output_tokens=LengthQuantiles(mean=200, p50=150, p95=400, p99=600),
        slo=Slo(ttft_slo, 0.2),
        sim_requests=2000,
    )


def test_the_looser_slo_takes_the_one_gpu_replica_and_lists_the_eight_gpu_one():
    # Demand 0.5 × (1,000 + 4 × 200) = 900 wt/s. One GPU: 12,000 × (4 + 684 ÷ 283) = 77,003 wt/s → 1 replica,
    # 1 GPU, $7/h. Eight GPUs: 1 replica, 8 GPUs, $56/h.
    r = size(inp(0.44))
    assert r.operating_point_used is ONE
    assert (r.replicas.total, r.accelerators, r.cost.per_hour.value) == (1, 1, 7.0)
    assert [(a.label, a.accelerators, a.cost_per_hour, a.extra_cost_per_hour) for a in r.alternatives] == [
        ("8× b200", 8, 56.0, 49.0)
    ]
    assert r.why_chosen == (
        "operating point 1× b200 (TTFT p99 0.4 s, TPOT p99 0.1 s): the cheapest of 2 feasible (2 measured point(s) "
        "of llama-2-70b within TTFT p99 ≤ 0.44 s and TPOT p99 ≤ 0.2 s) at 7/h fully loaded for 1 replicas × 1 b200; "
        "the runner-up, 8× b200, needs 1 replicas × 8 = 8 accelerators at 56/h (+49/h)"
    )
    assert r.assumptions[0] == r.why_chosen


def test_the_tighter_slo_costs_the_same_not_less():
    tight, loose = size(inp(0.40)), size(inp(0.44))
    assert tight.operating_point_used is ONE
    assert tight.alternatives == ()
    assert loose.cost.per_hour.value <= tight.cost.per_hour.value


def test_at_volume_each_shape_is_sized_in_full_before_the_costs_are_compared():
    # 300 req/s: 540,000 wt/s. One GPU: load ⌈540,000 ÷ (77,003 × 0.7)⌉ = 11 replicas, but ~6,100 requests in
    # flight hold more KV than 11 × 442,504 tokens, so memory sets the count. Eight GPUs: goodput
    # 99,123.04 × 6.417 = 636,059 wt/s → load ⌈1.21⌉ = 2 replicas (KV room 4.29M tokens each) = 16 GPUs = $112/h.
    r = size(inp(0.44, rate=300))
    assert r.replicas.for_load == 11
    assert r.replicas.total == r.replicas.for_kv > 11
    assert r.cost.per_hour.value == 7.0 * r.replicas.total
    alt = r.alternatives[0]
    assert (alt.replicas_total, alt.accelerators, alt.cost_per_hour) == (2, 16, 112.0)
    assert r.operating_point_used.label == ("1× b200" if 7.0 * r.replicas.total < 112 else "8× b200")


def test_a_pinned_accelerator_limits_the_search():
    r = size(replace(inp(0.44), accelerator="b200"))
    assert r.operating_point_used is ONE


# Cheapest, not fewest accelerators: eight cheap cards at $0.50/h each ($4/h) beat one B200 at $7/h. The
# other order of the rule (fewest accelerators, then cost) takes the B200; this case tells the two apart,
# which the cases above cannot (on one accelerator type the cost is proportional to the count).
L40S = AcceleratorSpec("l40s", memory_gb=48, cost=CloudAccelerator(on_demand_per_hour=0.5))
EIGHT_L40S = OperatingPoint("8× l40s", "l40s", 8, 12_000, MIX, 0.45, 0.2, 0.40, 0.1)


def test_eight_cheap_accelerators_win_over_one_dearer_one():
    r = size(replace(inp(0.44), operating_points=(ONE, EIGHT_L40S), accelerators=(B200, L40S)))
    assert r.operating_point_used is EIGHT_L40S
    assert (r.replicas.total, r.accelerators, r.cost.per_hour.value) == (1, 8, 4.0)
    assert [(a.label, a.accelerators, a.cost_per_hour, a.extra_cost_per_hour) for a in r.alternatives] == [
        ("1× b200", 1, 7.0, 3.0)
    ]
