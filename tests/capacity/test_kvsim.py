"""capacity.kvsim: the sweep line over start/end events, on a circle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.kvsim import EMPTY, poisson_axis, simulate, weighted_quantile


def test_evenly_spaced_requests_by_hand():
    # Arrivals every 1 s on a 10 s circle, each lives 1.5 s holding 100 KV tokens.
    # In [k, k + 0.5) two requests overlap (200 tokens), in [k + 0.5, k + 1) one does (100):
    # half the time at each level → p50 100, p99 200, mean 150 tokens and 1.5 requests.
    n = 10
    sim = simulate(np.arange(n, dtype=float), 10.0, 1.0, np.full(n, 1.5), np.full(n, 100.0), source="trace")
    assert sim.kv_tokens_p50 == 100
    assert sim.kv_tokens_p99 == 200
    assert sim.kv_tokens_max == 200
    assert sim.kv_tokens_mean == pytest.approx(150)
    assert sim.mean_concurrency == pytest.approx(1.5)
    assert sim.concurrency_p99 == 2
    assert sim.period_s == 10
    assert sim.largest_request_kv_tokens == 100
    assert sim.hist_time_fraction.sum() == pytest.approx(1.0)
    assert sim.hist_edges[0] == 0 and sim.hist_edges[-1] == 200


def test_time_scaling_compresses_the_same_arrivals():
    # Same axis, 2 s per unit: period 20 s, arrivals every 2 s, residence 1.5 s → never overlap:
    # 100 tokens for 75 % of the time, 0 for 25 %.
    n = 10
    sim = simulate(np.arange(n, dtype=float), 10.0, 2.0, np.full(n, 1.5), np.full(n, 100.0), source="trace")
    assert sim.kv_tokens_p99 == 100
    assert sim.kv_tokens_p50 == 100
    assert sim.mean_concurrency == pytest.approx(0.75)
    assert sim.hist_time_fraction[0] == pytest.approx(0.25)
    assert sim.hist_time_fraction[-1] == pytest.approx(0.75)


def test_residence_longer_than_the_period_wraps_more_than_once():
    # One request on a 1 s circle living 2.5 s: copies overlap so 2 or 3 are alive;
    # 3 alive for half of each second → mean 2.5 requests, p99 3 × 50 = 150 tokens.
    sim = simulate(np.array([0.0]), 1.0, 1.0, np.array([2.5]), np.array([50.0]), source="trace")
    assert sim.mean_concurrency == pytest.approx(2.5)
    assert sim.kv_tokens_p99 == 150
    assert sim.kv_tokens_p50 == 100


def test_empty():
    assert simulate(np.array([]), 10.0, 1.0, np.array([]), np.array([]), source="poisson") is EMPTY
    assert EMPTY.kv_tokens_p99 == 0


def test_weighted_quantile():
    levels = np.array([5.0, 1.0, 3.0])
    weights = np.array([1.0, 1.0, 2.0])
    # sorted 1 (25 %), 3 (75 %), 5 (100 %)
    assert weighted_quantile(levels, weights, 0.25) == 1
    assert weighted_quantile(levels, weights, 0.5) == 3
    assert weighted_quantile(levels, weights, 0.99) == 5


def test_poisson_axis_has_exact_mean_gap():
    axis = poisson_axis(np.random.default_rng(3), 5000)
    assert axis[-1] == pytest.approx(5000)
    assert bool(np.all(np.diff(axis) > 0))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    rate=st.floats(0.05, 50),
    faster=st.floats(1, 5),
    n=st.integers(1, 400),
)
def test_higher_rate_never_lowers_the_curve(seed, rate, faster, n):
    rng = np.random.default_rng(seed)
    axis = poisson_axis(rng, n)
    res = rng.uniform(0.1, 30, n)
    kv = np.ceil(rng.uniform(1, 5000, n))
    a = simulate(axis, float(n), 1 / rate, res, kv, source="poisson")
    b = simulate(axis, float(n), 1 / (rate * faster), res, kv, source="poisson")
    for f in ("kv_tokens_p50", "kv_tokens_p99", "kv_tokens_max", "concurrency_p99"):
        assert getattr(b, f) >= getattr(a, f)
    assert b.mean_concurrency >= a.mean_concurrency * (1 - 1e-9)
    assert b.kv_tokens_mean >= a.kv_tokens_mean * (1 - 1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 2000), rate=st.floats(0.01, 100))
def test_littles_law_on_the_circle(seed, n, rate):
    rng = np.random.default_rng(seed)
    res = rng.uniform(0.01, 100, n)
    sim = simulate(poisson_axis(rng, n), float(n), 1 / rate, res, np.ones(n), source="poisson")
    assert sim.mean_concurrency == pytest.approx(rate * res.mean(), rel=1e-9)
    assert sim.kv_tokens_mean == pytest.approx(rate * res.mean(), rel=1e-9)
