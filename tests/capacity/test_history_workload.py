"""An entitlement's recorded buckets as a replayable workload, in bounded work (reconciliation)."""

import numpy as np

from capacity import planning_workload as pw
from capacity.planning import plan, replay


def test_small_histories_replay_every_recorded_reservation():
    w = pw.bucket_workload([0, 60], [3, 2], [300.0, 100.0], name="s")
    assert len(w) == 5
    assert w.cost_wt.tolist() == [100.0, 100.0, 100.0, 50.0, 50.0]
    assert "5 recorded reservations" in w.basis and "standing for" not in w.basis


def test_a_busy_history_is_bounded_and_keeps_every_buckets_total(monkeypatch):
    monkeypatch.setattr(pw, "MAX_HISTORY_REQUESTS", 1_000)
    minutes = 14 * 24 * 60
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 40, minutes)
    wt = counts * 900.0
    w = pw.bucket_workload(np.arange(minutes) * 60.0, counts, wt, name="busy")
    assert len(w) <= 1_000 + minutes  # at most one partial lump per bucket beyond the bound
    assert len(w) < int(counts.sum()) / 10
    assert w.cost_wt.sum() == wt.sum()
    assert f"{int(counts.sum()):,} recorded reservations" in w.basis and "standing for up to" in w.basis


def test_bundling_only_errs_upward():
    # Lumps need the level at once: the CU to buy from a bundled history is never below the exact one.
    minutes = 6 * 60
    rng = np.random.default_rng(7)
    counts = rng.poisson(rng.gamma(2.0, 15.0, minutes))
    wt = counts * 1_000.0
    start = np.arange(minutes) * 60.0
    exact = pw.bucket_workload(start, counts, wt, name="exact")
    original = pw.MAX_HISTORY_REQUESTS
    try:
        pw.MAX_HISTORY_REQUESTS = len(exact) // 8
        lumped = pw.bucket_workload(start, counts, wt, name="lumped")
    finally:
        pw.MAX_HISTORY_REQUESTS = original
    assert len(lumped) < len(exact)
    a = plan(exact, r_wt_per_s=1_000.0, target_throttled_share=0.001)
    b = plan(lumped, r_wt_per_s=1_000.0, target_throttled_share=0.001)
    assert b.cu_to_buy >= a.cu_to_buy
    assert replay(lumped, b.cu_to_buy, 1_000.0).throttled_share <= 0.001
