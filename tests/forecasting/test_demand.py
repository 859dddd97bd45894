"""Forecast core on synthetic series (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from forecasting import demand
from forecasting.history import DemandSeries
from tests.forecasting.helpers import daily_cu

START = datetime(2026, 1, 5, tzinfo=UTC)


def _series(n: int, hours: int, noise: float = 2.0) -> list[DemandSeries]:
    return [
        DemandSeries(f"t{i}", "m", "r", START, daily_cu(hours, base=20, amp=10, noise=noise, seed=100 + i))
        for i in range(n)
    ]


def test_backtest_beats_seasonal_naive_on_known_daily_seasonality():
    # Given five weeks of a known daily shape plus noise (train on four, hold out the last week)
    batch = _series(4, 24 * 35)
    # When backtested
    results = demand.backtest_batch(batch)
    # Then the fitted model's MAPE is below seasonal-naive's on every series: it averages the
    # daily shape over weeks, while seasonal-naive repeats yesterday's noise.
    assert [r["mape"] < r["baseline_mape"] for r in results] == [True, True, True, True]
    assert np.mean([r["mape"] for r in results]) < 0.9 * np.mean([r["baseline_mape"] for r in results])


def test_method_follows_history_length():
    assert demand.method_for(24 * 13) == "ets"
    assert demand.method_for(24 * 14) == "mstl"


def test_scenarios_are_ordered_and_start_after_history():
    batch = _series(2, 24 * 21)
    out = demand.forecast_batch(batch, horizon_h=48)
    assert [f.method for f in out] == ["mstl", "mstl"]
    assert [f.start for f in out] == [datetime(2026, 1, 26, tzinfo=UTC)] * 2
    for f in out:
        assert len(f.p50) == 48
        assert bool(np.all(f.p50 <= f.p90)) and bool(np.all(f.p90 <= f.p99))
        assert bool(np.all(f.p50 >= 0))


def test_too_short_a_history_gets_no_backtest():
    batch = [DemandSeries("t", "m", "r", START, np.full(24 * 8, 5.0))]  # 8 days: 1 day left after holding out 7
    assert demand.backtest_batch(batch) == [
        {"mape": None, "coverage_80": None, "baseline_mape": None, "resid_q90": None, "resid_q99": None}
    ]


def test_mape_ignores_hours_without_demand():
    assert demand.mape(np.array([0.0, 10.0, 20.0]), np.array([5.0, 11.0, 18.0])) == 0.1
    assert demand.mape(np.zeros(3), np.ones(3)) is None


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
