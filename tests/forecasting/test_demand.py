"""Forecast core on synthetic series with known cycles and trends (no database).

Each series has five weeks of history: three one-week backtest origins (two to choose on, the
last to score on) leave MSTL its two weekly seasons at the first origin.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from forecasting import demand, guard, selection
from forecasting.history import DemandSeries
from tests.forecasting.helpers import cycles_cu

START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
FIVE_WEEKS = 5 * 168
HORIZON = 26 * 168


def _naive_best(f: demand.SeriesForecast) -> float:
    assert f.backtest is not None
    return min(
        float(c["holdout_error"]) for c in f.backtest.candidates if c["method"] in ("naive_daily", "naive_weekly")
    )  # type: ignore[arg-type]


def _series(name: str, cu: np.ndarray) -> DemandSeries:
    return DemandSeries(name, "m", "r", START, cu)


def _weekly_means(values: np.ndarray) -> np.ndarray:
    return values[len(values) % 168 :].reshape(-1, 168).mean(axis=1)


def test_chosen_model_beats_the_naive_baselines_on_daily_and_weekly_cycles():
    # Given two series with known daily and weekly cycles and noise
    batch = [_series(f"t{i}", cycles_cu(FIVE_WEEKS, base=20 + 5 * i, seed=i)) for i in range(2)]
    # When each chooses among the candidates
    out = demand.forecast_batch(batch, horizon_h=48)
    # Then MSTL, the one model of both cycles, wins the selection weeks, and on the held-out week
    # it beats both seasonal-naive baselines
    assert [f.method for f in out] == ["mstl", "mstl"]
    for f in out:
        assert f.backtest is not None and f.backtest.holdout_error is not None
        assert f.backtest.holdout_error <= _naive_best(f)
        assert [c["method"] for c in f.backtest.candidates] == [
            "naive_daily",
            "naive_weekly",
            "ets_damped",
            "mstl",
            "theta",
        ]


def test_chosen_model_beats_the_naive_baselines_on_a_known_trend():
    # Given series growing 4 % and 8 % of their base a week, with both cycles
    batch = [
        _series(f"g{i}", cycles_cu(FIVE_WEEKS, base=20, trend_per_week=0.04 * (i + 1), seed=10 + i)) for i in range(2)
    ]
    out = demand.forecast_batch(batch, horizon_h=48)
    for f in out:
        assert f.backtest is not None and f.backtest.holdout_error is not None
        assert f.backtest.holdout_error <= _naive_best(f)
    assert [guard.is_stationary(s.values) for s in batch] == [False, False]


def test_the_choice_is_made_on_the_earlier_origins_never_on_the_holdout():
    # Given two candidates over three one-week origins: "a" is right on the first two and wrong on
    # the last; "b" is wrong on the first two and right on the last
    y = np.full((1, 3, 168), 10.0)
    a = np.array([[np.full(168, 10.0), np.full(168, 10.0), np.full(168, 5.0)]])
    b = np.array([[np.full(168, 15.0), np.full(168, 15.0), np.full(168, 10.0)]])
    arrays = {"y": y, "a": a, "a-hi-80": a, "a-hi-98": a, "b": b, "b-hi-80": b, "b-hi-98": b}
    # When chosen
    t = selection.choose(arrays, 0, ("a", "b"))
    # Then "a" wins (the holdout is not looked at) and reports its holdout error honestly
    assert t.method == "a"
    assert t.candidates == [
        {"method": "a", "selection_error": 0.0, "holdout_error": 0.5},
        {"method": "b", "selection_error": 0.5, "holdout_error": 0.0},
    ]
    assert t.holdout_error == 0.5
    # The bands were calibrated on the selection origins (no miss there), so they cover nothing of
    # a holdout that came in above them
    assert t.chosen is not None and t.chosen.coverage == {"p50": 0.0, "p90": 0.0, "p99": 0.0}


def test_a_flat_history_is_not_given_a_trend_over_26_weeks():
    # Given a stationary series (both cycles, no trend) ending on a quiet Sunday
    s = _series("flat", cycles_cu(FIVE_WEEKS, base=20, seed=7))
    assert guard.is_stationary(s.values) is True
    # When forecast 26 weeks ahead with every candidate available
    (f,) = demand.forecast_batch([s], horizon_h=HORIZON)
    # Then every forecast week's mean stays within the history's weekly means ± the band earned
    assert f.backtest is not None and f.backtest.chosen is not None
    past, ahead, w = _weekly_means(s.values), _weekly_means(f.p50), f.backtest.chosen.weekly_miss
    assert past.min() - w <= ahead.min() and ahead.max() <= past.max() + w
    assert ahead[-1] == pytest.approx(past.mean(), rel=0.05)


def test_a_drifting_winner_on_a_flat_history_falls_back_and_says_so():
    # Given the same kind of flat series, where only daily-seasonal models compete: Theta wins the
    # selection weeks but its drift takes the 26-week forecast down by a third
    s = _series("flat", cycles_cu(FIVE_WEEKS, base=20, seed=1))
    (f,) = demand.forecast_batch([s], horizon_h=HORIZON, candidates=("naive_daily", "theta"))
    assert f.backtest is not None
    assert min(f.backtest.selection_errors, key=f.backtest.selection_errors.get) == "theta"  # type: ignore[arg-type]
    # Then the guard replaces it with the weekly seasonal-naive forecast, which repeats the last week
    assert f.method == "naive_weekly"
    assert f.note == "theta left the range of a stationary history: forecast with naive_weekly"
    past, ahead = _weekly_means(s.values), _weekly_means(f.p50)
    assert ahead.min() >= past.min() and ahead.max() <= past.max()


def test_bands_are_ordered_and_start_after_history():
    batch = [_series("t", cycles_cu(FIVE_WEEKS, base=20, seed=3))]
    (f,) = demand.forecast_batch(batch, horizon_h=48, candidates=("naive_daily", "naive_weekly"))
    assert f.start == datetime(2026, 2, 9, tzinfo=UTC)
    assert len(f.p50) == 48
    assert bool(np.all(f.p50 <= f.p90)) and bool(np.all(f.p90 <= f.p99)) and bool(np.all(f.p50 >= 0))
    assert f.backtest is not None and f.backtest.chosen is not None
    assert set(f.backtest.chosen.coverage) == {"p50", "p90", "p99"}


def test_a_history_too_short_to_backtest_is_forecast_seasonal_naive_and_says_so():
    (f,) = demand.forecast_batch([_series("t", np.full(24 * 8, 5.0))], horizon_h=24)
    assert (f.method, f.backtest, f.note) == ("naive_weekly", None, "history too short to backtest: seasonal-naive")
    assert f.p50.tolist() == [5.0] * 24


def test_origins_and_candidates_follow_history_length():
    assert selection.plan(5 * 168) == (3, ("naive_daily", "naive_weekly", "ets_damped", "mstl", "theta"))
    assert selection.plan(4 * 168) == (2, ("naive_daily", "naive_weekly", "ets_damped", "mstl", "theta"))
    assert selection.plan(3 * 168) == (2, ("naive_daily", "naive_weekly", "ets_damped", "theta"))
    assert selection.plan(2 * 168 + 47) is None


def test_wape_is_defined_at_zero_hours():
    assert selection.wape(np.array([0.0, 10.0, 30.0]), np.array([5.0, 11.0, 26.0])) == 0.25
    assert selection.wape(np.zeros(3), np.ones(3)) is None


def test_stress_spike_hits_every_series_at_the_same_hours():
    f1 = demand.SeriesForecast(
        ("a", "m", "r"), "ets", 48, START, np.ones(48), np.ones(48), np.full(48, 2.0), np.ones(1)
    )
    f2 = demand.SeriesForecast(
        ("b", "m", "r"), "ets", 48, START, np.ones(48), np.ones(48), np.full(48, 4.0), np.ones(1)
    )
    f1.p50[[9, 10, 33]] = 5.0  # expected demand peaks at 09:00 and 10:00
    hours = demand.spike_hours([f1, f2], 2)
    assert hours == [9, 10]
    s1 = demand.stress(f1, spike_pct=50, hours=hours)
    s2 = demand.stress(f2, spike_pct=50, hours=hours)
    assert list(np.flatnonzero(s1 > 2.0)) == [9, 10, 33, 34]
    assert list(np.flatnonzero(s2 > 4.0)) == [9, 10, 33, 34]
    assert s1[9] == 3.0 and s2[34] == 6.0
