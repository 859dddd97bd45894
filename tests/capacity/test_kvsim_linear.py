"""capacity.kvsim in linear time (issue 35.5): the same figures, bit for bit, as the plain sweep
that argsorts all 2n event times and sorts the requests in flight and the KV levels for their
quantiles (the histogram's fractions to 1e-12: its times are summed in another order)."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.kvsim import _count_quantile, _LevelTime, _stable_order, simulate, weighted_quantile


def _reference(axis, period_axis, spu, residence_s, kv_tokens, bins=40):  # type: ignore[no-untyped-def]
    """The sweep as it was: one stable argsort of every event time, a sort for each quantile."""
    period = period_axis * spu
    start = np.mod(axis, period_axis) * spu
    if np.any(start[1:] < start[:-1]):
        order = np.argsort(start, kind="stable")
        start, residence_s, kv_tokens = start[order], residence_s[order], kv_tokens[order]
    end = start + residence_s
    k = np.maximum(np.ceil(end / period) - 1, 0)
    e = end - k * period
    over = e > period
    k, e = np.where(over, k + 1, k), np.where(over, e - period, e)
    under = (e <= 0) & (k > 0)
    k, e = np.where(under, k - 1, k), np.where(under, e + period, e)
    partial = (k >= 1) & (e < period)
    full = k - partial
    base_kv, base_n, w_end, w_kv = float(np.sum(full * kv_tokens)), int(np.sum(full)), e[partial], kv_tokens[partial]
    s_time = np.concatenate((np.zeros(len(w_end)), start))
    s_kv = np.concatenate((w_kv, kv_tokens))
    e_time = np.concatenate((w_end, end))
    inside = e_time < period
    times = np.concatenate(([0.0], s_time, e_time[inside]))
    order = np.argsort(times, kind="stable")
    kv_level = np.cumsum(np.concatenate(([base_kv], s_kv, -s_kv[inside]))[order])
    n_inside = int(inside.sum())
    req = np.cumsum(np.concatenate(([base_n], np.ones(len(s_time), np.int64), -np.ones(n_inside, np.int64)))[order])
    duration = np.diff(np.append(times[order], period))
    by_kv = np.argsort(kv_level)
    cum_w = np.cumsum(duration[by_kv])
    kv_max = float(kv_level[duration > 0].max(initial=0.0))
    edges = np.linspace(0.0, max(kv_max, 1.0), bins + 1)
    at_edge = np.searchsorted(kv_level[by_kv], edges[1:], side="right")
    cum_at_edge = np.where(at_edge > 0, cum_w[np.maximum(at_edge - 1, 0)], 0.0)
    total = float(duration.sum())
    req_f = np.maximum(req, 0).astype(np.float64)
    return {
        "mean_concurrency": float(np.sum(req_f * duration)) / total,
        "concurrency_p99": weighted_quantile(req_f, duration, 0.99),
        "kv_tokens_mean": float(np.sum(kv_level * duration)) / total,
        "kv_tokens_p50": weighted_quantile(kv_level, duration, 0.50),
        "kv_tokens_p99": weighted_quantile(kv_level, duration, 0.99),
        "kv_tokens_max": kv_max,
        "time_fraction": (np.diff(np.concatenate(([0.0], cum_at_edge))) / total).tolist(),
    }


def _case(rng: np.random.Generator, n: int, kind: int):  # type: ignore[no-untyped-def]
    axis = rng.uniform(0, n, n)
    if kind % 2 == 0:
        axis = np.sort(axis)
    if kind == 2:
        axis = np.floor(axis / 5) * 5  # many starts at the same instant
    res = rng.exponential(rng.uniform(0.1, 50), n)
    if kind == 3:
        res = np.round(res)  # ends on starts
        res[0] = 0.0
    kv = np.ceil(rng.uniform(1, 5000, n)) * (0.5 if kind == 1 else 1.0)
    return axis, res, kv


@pytest.mark.parametrize("spu", [1.0, 3.7, 1e-3, 1e-7])  # 1e-7: every request wraps many times
@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [1, 7, 300, 9000])  # 9,000: past the bucketed sort's threshold
def test_the_same_figures_as_the_plain_sweep_bit_for_bit(n, kind, spu):
    rng = np.random.default_rng([n, kind, int(spu * 1e9)])
    axis, res, kv = _case(rng, n, kind)
    sim = simulate(axis, float(n), spu, res, kv, source="poisson")
    ref = _reference(axis, float(n), spu, res, kv)
    fraction = ref.pop("time_fraction")
    assert {k: getattr(sim, k) for k in ref} == ref
    # The histogram's times are summed by KV level (a bincount over half tokens) rather than in the
    # sorted order, so a fraction may differ in its last bits: within 1e-12 of the whole period.
    assert sim.hist_time_fraction.tolist() == pytest.approx(fraction, rel=1e-12, abs=1e-12)


def test_stable_order_is_the_stable_argsort():
    rng = np.random.default_rng(5)
    for x in (
        rng.uniform(0, 1e4, 50_000),
        np.round(rng.uniform(0, 100, 50_000)),  # many ties
        np.concatenate([np.full(10_000, 3.0), rng.exponential(1.0, 10_000)]),
        np.full(8_000, 2.0),
        np.array([1e-300, 1e300] * 5000),
    ):
        assert np.array_equal(_stable_order(x), np.argsort(x, kind="stable"))


def test_count_quantile_is_the_weighted_quantile():
    rng = np.random.default_rng(6)
    for _ in range(200):
        levels = rng.integers(0, 50, 1000)
        weights = rng.exponential(1.0, 1000) * (rng.uniform(size=1000) < 0.7)
        for q in (0.01, 0.5, 0.99, 1.0):
            assert _count_quantile(levels, weights, q) == weighted_quantile(levels.astype(float), weights, q)
    # Levels spanning far more than their count fall back on the sort.
    levels = np.array([0, 10**12, 5], np.int64)
    assert _count_quantile(levels, np.array([1.0, 1.0, 2.0]), 0.99) == 10**12


def test_level_time_counts_half_tokens_and_sorts_anything_else():
    rng = np.random.default_rng(7)
    weights = rng.exponential(1.0, 5000) * (rng.uniform(size=5000) < 0.8)
    edges = np.linspace(0.0, 3000.0, 41)
    for levels, counted in (
        (np.cumsum(rng.integers(-40, 41, 5000)) * 0.5 + 1500, True),  # half tokens: the bincount
        (np.cumsum(rng.integers(-40, 41, 5000)) * 0.25 + 1500, False),  # quarter tokens: the sort
        (np.array([0.0, 1e12, 5.0] * 100), False),  # spanning far more slots than events: the sort
    ):
        got = _LevelTime.of(levels, weights[: len(levels)])
        assert (got.levels is None) == counted
        order = np.argsort(levels, kind="stable")
        cum = np.cumsum(weights[: len(levels)][order])
        for q in (0.01, 0.5, 0.99, 1.0):
            assert got.quantile(q) == weighted_quantile(levels, weights[: len(levels)], q)
        below = np.searchsorted(levels[order], edges, side="right")
        expected = np.where(below > 0, cum[np.maximum(below - 1, 0)], 0.0)
        assert got.at_or_below(edges) == pytest.approx(expected, rel=1e-12, abs=1e-12)
