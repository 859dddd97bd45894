"""Young level shifts on daily levels (issue 47, forecasting/change_points.py): no database, no fits."""

from __future__ import annotations

import numpy as np
import pytest

from forecasting import change_points as cp
from tests.forecasting.helpers import cycles_cu

WEEK = 168
N = 20 * WEEK  # hour 0 is a Monday: 20 whole weeks end on a Sunday night


def _stepped(factor: float, days: int, seed: int = 5) -> np.ndarray:
    v = cycles_cu(N, base=10, seed=seed)
    v[N - days * 24 :] *= factor
    return v


@pytest.mark.parametrize("factor", [1.2, 0.8, 1.6, 0.5])
@pytest.mark.parametrize("seed", [5, 11, 12])
def test_a_step_of_20_percent_or_more_is_seen_three_days_after_it(factor, seed):
    for days in (3, 4, 7, 11, 20):
        step = cp.detect(_stepped(factor, days, seed))
        assert step is not None, days
        assert step.days_back == days
        assert abs(step.ratio / factor - 1) < 0.05


@pytest.mark.parametrize("back", [3, 5, 9, 15])
@pytest.mark.parametrize("height", [1.5, 2.0, 3.0])
def test_a_spike_that_reverts_is_not_a_step(back, height):
    # One or two busy days, then the old level again
    for length in (1, 2):
        v = cycles_cu(N, base=10, seed=6)
        v[N - back * 24 : N - back * 24 + length * 24] *= height
        assert cp.detect(v) is None, (back, height, length)


def test_no_step_on_steady_trending_noisy_weekend_or_bursty_series():
    n = N
    rng = np.random.default_rng(9)
    bursty = cycles_cu(n, base=10, seed=3)
    bursty[rng.choice(n, 12, replace=False)] *= 4
    bursty[n - 30] = 55.0
    for v in (
        cycles_cu(n, base=10, seed=1),
        cycles_cu(n, base=10, trend_per_week=0.35 / 8, seed=0),
        cycles_cu(n, base=10, seed=2) * np.random.default_rng(0).lognormal(0, 0.25, n),
        cycles_cu(n, base=10, weekend=0.4, seed=4),
        bursty,
    ):
        assert cp.detect(v) is None


def test_a_ten_percent_wobble_is_not_a_step():
    assert cp.detect(_stepped(1.1, 10)) is None


def test_reanchor_scales_only_the_history_before_the_step():
    v = _stepped(1.5, 7)
    step = cp.detect(v)
    out = cp.reanchor(v, step)
    assert np.array_equal(out[-7 * 24 :], v[-7 * 24 :])
    assert np.allclose(out[: -7 * 24], v[: -7 * 24] * step.ratio)
    # the whole re-anchored history sits at one level: its weekly means differ by noise only
    weeks = out.reshape(-1, WEEK).mean(axis=1)
    assert weeks.max() / weeks.min() < 1.05


def test_bands_widen_by_the_step_until_three_weeks_have_passed():
    assert cp.young_widening(None) == 0.0
    assert cp.young_widening(cp.Step(days_back=0, ratio=1.4, z=9)) == pytest.approx(0.4)
    assert cp.young_widening(cp.Step(days_back=7, ratio=0.7, z=9)) == pytest.approx(0.3 * 2 / 3)
    assert cp.young_widening(cp.Step(days_back=21, ratio=1.4, z=9)) == 0.0
