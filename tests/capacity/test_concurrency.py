"""Issue 15.5, by hand: Little's law × burst, capped by the entitlement's share of the pool's KV."""

from __future__ import annotations

import pytest

from capacity.concurrency import concurrency_cap

BASE = {
    "cu": 10.0,
    "r_wt_per_s": 1000.0,
    "w_out": 4.0,
    "prompt_mean": 300.0,
    "output_mean": 100.0,
    "ttft_s": 2.0,
    "tpot_s": 0.2,
    "latency_source": "the point's p99 limits",
    "burst_factor": 2.0,
    "pool_cu": 140.0,
    "replicas": 2,
}


def test_the_kv_share_binds_a_long_residence():
    # 10 CU × 1,000 ÷ (300 + 4 × 100) = 14.2857 req/s; residence 2 + 100 × 0.2 = 22 s; Little 314.29;
    # × 2 → ⌈628.57⌉ = 629. KV: 10 ÷ 140 × 2 replicas × 1,525,878 tokens ÷ 400 tokens = ⌊544.96⌋ = 544.
    cap = concurrency_cap(**BASE, kv_tokens_per_replica=1_525_878)
    assert cap.requests_per_s == pytest.approx(10_000 / 700, rel=1e-12)
    assert cap.residence_s == 22.0
    assert cap.little == pytest.approx(314.2857142857, rel=1e-9)
    assert (cap.burst_cap, cap.kv_ceiling, cap.value, cap.binding) == (629, 544, 544, "kv")
    assert cap.formula.startswith("544 = max(1, min(⌈14.286 req/s × 22 s × burst 2⌉ = 629, ⌊10 ÷ 140 CU × 2 replicas")


def test_the_burst_binds_when_memory_is_ample():
    cap = concurrency_cap(**BASE, kv_tokens_per_replica=10_000_000)
    assert (cap.value, cap.binding) == (629, "burst")  # KV ceiling ⌊10/140 × 2 × 1e7 ÷ 400⌋ = 3,571


def test_never_below_one_and_refuses_nonsense():
    assert concurrency_cap(**{**BASE, "cu": 0.0001}, kv_tokens_per_replica=1000).value == 1
    with pytest.raises(ValueError):
        concurrency_cap(**{**BASE, "burst_factor": 0.5}, kv_tokens_per_replica=1000)
