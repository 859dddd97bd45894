"""The continuous-batching simulation: hand-checkable schedules, its caps, and that it reproduces the
curve's step law at steady load."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.batching_sim import MAX_SIM_REQUESTS, WARMUP_SHARE, StepLaw, replica_share, simulate
from capacity.latency_curve import LatencyCurve
from capacity.latency_fleet import Fleet

LAW = StepLaw(a_s=0.01, k_s=0.0001, max_batch=8, kv_budget=10_000, ttft_floor_s=0.5, w_out=4.0)


def run(arrivals, prefill, output, kv, law=LAW, replicas=1, lb=1.0, ttft=10.0, tpot=1.0):
    return simulate(
        arrival_s=np.asarray(arrivals, dtype=float),
        prefill_wt=np.asarray(prefill, dtype=float),
        output_tokens=np.asarray(output, dtype=float),
        kv_tokens=np.asarray(kv, dtype=float),
        replicas=replicas,
        lb_unevenness=lb,
        law=law,
        ttft_slo_s=ttft,
        tpot_slo_s=tpot,
    )


def test_one_request_alone_by_hand():
    r = run([0.0], [1000], [11], [1011])
    # Admission step: 0.01 + 0.0001 × 1000 prefill = 0.11 s; then 10 decode steps of 0.01 + 0.0001 × 4 × 1.
    assert r.ttft_p50_s == pytest.approx(0.5 + 0.11)
    assert r.tpot_p50_s == pytest.approx(0.0104)
    assert r.attainment == 1.0


def test_kv_budget_makes_the_second_request_wait_for_the_first():
    # Each needs 6,000 of the 10,000 KV tokens: the second is admitted only when the first has left.
    r = simulate(
        arrival_s=np.array([0.0, 0.0]),
        prefill_wt=np.array([0.0, 0.0]),
        output_tokens=np.array([3.0, 3.0]),
        kv_tokens=np.array([6000.0, 6000.0]),
        replicas=1,
        lb_unevenness=1.0,
        law=StepLaw(0.01, 0.0001, 8, 10_000, 0.0, 4.0),
        ttft_slo_s=10,
        tpot_slo_s=1,
    )
    first_done = 0.01 + 2 * 0.0104  # admission step, then two decode steps alone
    assert r.ttft_p99_s == pytest.approx(np.percentile([0.01, first_done + 0.01], 99), rel=1e-9)


def test_the_batch_cap_queues_the_rest():
    law = StepLaw(0.01, 0.0, 1, 1e9, 0.0, 4.0)
    r = run([0.0] * 10, [0] * 10, [2] * 10, [1] * 10, law=law)
    # One at a time, each holds the replica for 2 steps of 0.01 s: the last starts at 0.18 s.
    assert r.ttft_p99_s == pytest.approx(0.18 + 0.01, rel=0.02)


def test_round_robin_simulates_every_nth_request_faster_by_the_unevenness():
    idx, t = replica_share(np.array([3.0, 0.0, 2.0, 1.0, 4.0]), 2, 1.25)
    assert idx.tolist() == [1, 2, 4]
    assert t.tolist() == pytest.approx([0.0, 1.6, 3.2])


def test_past_the_cap_a_window_is_sampled_and_said():
    n = 3 * MAX_SIM_REQUESTS
    r = run(np.arange(n) * 0.5, np.zeros(n), np.full(n, 2.0), np.ones(n))
    assert r.sampled and r.requests == MAX_SIM_REQUESTS
    assert r.counted == MAX_SIM_REQUESTS - int(MAX_SIM_REQUESTS * WARMUP_SHARE)
    assert "samples" in r.note
    small = run(np.arange(100) * 0.5, np.zeros(100), np.full(100, 2.0), np.ones(100))
    assert not small.sampled and small.requests == 100


def test_a_slo_the_floor_misses_is_never_attained():
    r = run([0.0, 1.0], [0, 0], [5, 5], [1, 1], ttft=0.4)  # floor 0.5 s > 0.4 s
    assert r.attainment == 0.0


def test_steady_decoding_matches_the_curves_step_law():
    # Evenly spaced arrivals of one-token-prompt requests: the batch settles where the step time
    # is a / (1 − x / x_inf), the curve's TPOT at that load.
    curve = LatencyCurve(a_s=0.02, x_inf=10_000.0, x_sat=9_000.0, p_s=0.1, w_s=0.05, points=())
    fleet = Fleet(curve, wt_per_request=4.0 * 200, wt_per_out_ref=4.0, lb_unevenness=1.0)
    rate = 20.0  # 20 req/s × 200 tokens = 4,000 tok/s = 0.4 x_inf
    n = 3000
    r = simulate(
        arrival_s=np.arange(n) / rate,
        prefill_wt=np.zeros(n),
        output_tokens=np.full(n, 200.0),
        kv_tokens=np.full(n, 200.0),
        replicas=1,
        lb_unevenness=1.0,
        law=fleet.step_law(1e12, 4.0),
        ttft_slo_s=10,
        tpot_slo_s=1,
    )
    assert r.tpot_p50_s == pytest.approx(curve.tpot_p99(4000.0), rel=0.02)
