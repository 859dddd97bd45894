"""Accuracy fed back (issue 32): an earlier run's forecast against what happened moves this run's
ranking and bands."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from forecasting import pipeline, realised, selection
from forecasting.candidates import WEEK
from forecasting.history import DemandSeries
from forecasting.models import ForecastRun, ForecastSeries
from tests.forecasting.helpers import END, cycles_cu

HISTORY = cycles_cu(8 * WEEK, base=10, seed=21)
SERIES = DemandSeries("acme", "llama-test", "us-test", END - timedelta(weeks=8), HISTORY)


def test_widen_factor_moves_toward_ninety_percent_coverage_as_weeks_accrue():
    assert realised.widen_factor(0, 0) == 1.0
    assert realised.widen_factor(4, 8) == pytest.approx(1 + 8 / 12 * 2 * 0.4)  # half under: wider
    assert realised.widen_factor(8, 8) == pytest.approx(1 - 8 / 12 * 2 * 0.1)  # all under: narrower
    assert realised.widen_factor(0, 100) == 2.0  # bounded


def _old_run(*, start, method: str, mean: float, peak: float, status=ForecastRun.Status.SUCCEEDED) -> None:
    run = ForecastRun.objects.create(status=status, progress=100)
    ForecastSeries.objects.create(
        run=run,
        tenant_slug="acme",
        model="llama-test",
        region="us-test",
        method=method,
        history_hours=840,
        start=start,
        weekly={"expected_mean": [mean] * 26, "upside_peak": [peak] * 26, "expected_peak": [peak] * 26},
    )


def test_a_forecast_made_four_weeks_ago_is_scored_and_fed_back(db):
    # Given a run whose forecast started four weeks ago: 8 CU a week (it was 10) and a P90 peak below
    # every realised peak, and a failed run and a run of another start that must not count
    _old_run(start=END - timedelta(weeks=4), method="theta", mean=8.0, peak=9.0)
    _old_run(start=END - timedelta(weeks=4), method="mstl", mean=10.0, peak=99.0, status=ForecastRun.Status.FAILED)
    _old_run(start=END - timedelta(weeks=2), method="mstl", mean=10.0, peak=99.0)
    # When this run reads the feedback
    (fb,), (shown,) = realised.feedback([SERIES], END)
    # Then theta's realised error over the four weeks now past is what happened, scaled like the backtest
    weeks = HISTORY[-4 * WEEK :].reshape(4, WEEK)
    expected = float(np.mean(np.abs(8.0 - weeks.mean(axis=1))) / selection.mase_scale(HISTORY))
    assert fb.realised == {"theta": pytest.approx(expected, abs=1e-4)}
    assert shown["lags"]["4"]["weeks"] == 4 and shown["lags"]["4"]["peaks_under_p90"] == 0
    assert set(shown["lags"]) == {"4"}
    # and no peak stayed under the P90: the bands widen by the shrunk correction
    assert fb.widen == pytest.approx(1 + 4 / 8 * 2 * 0.9)


def test_feedback_widens_the_bands_and_counts_in_the_ranking():
    plain, fed = pipeline.forecast_batch(
        [SERIES, SERIES],
        horizon_h=4 * WEEK,
        feedback=[pipeline.Feedback(), pipeline.Feedback({"theta": 5.0}, widen=1.5)],
    )
    assert plain.backtest.row("theta")["score"] == plain.backtest.row("theta")["selection_error"]
    assert fed.backtest.row("theta")["score"] == pytest.approx(
        0.5 * fed.backtest.row("theta")["selection_error"] + 2.5, abs=1e-4
    )
    # theta was not the choice either way (its penalty changes nothing here), so the bands compare
    assert plain.method == fed.method != "theta"
    width, wider = plain.p90 - plain.p50, fed.p90 - fed.p50
    assert (width > 1e-6).sum() > WEEK
    assert np.allclose(wider[width > 1e-6] / width[width > 1e-6], 1.5)


def test_forecasts_made_one_four_and_thirteen_weeks_ago_are_each_scored(db):
    # Given 16 weeks of history and a succeeded run whose forecast started 1, 4 and 13 weeks before
    # this run's end (two of them with the same method), each with P90 peaks every realised week beat
    history = cycles_cu(16 * WEEK, base=10, seed=22)
    series = DemandSeries("acme", "llama-test", "us-test", END - timedelta(weeks=16), history)
    _old_run(start=END - timedelta(weeks=1), method="theta", mean=9.0, peak=99.0)
    _old_run(start=END - timedelta(weeks=4, days=2), method="mstl", mean=12.0, peak=99.0)  # within ± 3 days
    _old_run(start=END - timedelta(weeks=13), method="theta", mean=10.0, peak=0.0)
    _old_run(start=END - timedelta(weeks=8), method="naive_weekly", mean=10.0, peak=0.0)  # no lag of ours
    (fb,), (shown,) = realised.feedback([series], END)
    scale = selection.mase_scale(history)

    def mase(start_h: int, weeks: int, mean: float) -> float:
        real = history[start_h : start_h + weeks * WEEK].reshape(weeks, WEEK).mean(axis=1)
        return float(np.mean(np.abs(mean - real)) / scale)

    # Then each lag compares the weeks now past of the forecast made then
    assert {k: (v["method"], v["weeks"]) for k, v in shown["lags"].items()} == {
        "1": ("theta", 1),
        "4": ("mstl", 4),  # 4 weeks and 2 days ago: four whole weeks are past
        "13": ("theta", 13),
    }
    four = 16 * WEEK - (4 * WEEK + 48)
    assert shown["lags"]["4"]["mase"] == pytest.approx(mase(four, 4, 12.0), abs=1e-4)
    # the method's realised error is the mean over the lags it was chosen at
    assert fb.realised == {
        "theta": pytest.approx((mase(15 * WEEK, 1, 9.0) + mase(3 * WEEK, 13, 10.0)) / 2, abs=1e-4),
        "mstl": pytest.approx(mase(four, 4, 12.0), abs=1e-4),
    }
    # and the bands move by the pooled coverage: 5 of 18 weeks under the P90 (the 13-week run's P90 was 0)
    assert (shown["p90_peak_coverage"], fb.widen) == (round(5 / 18, 4), pytest.approx(realised.widen_factor(5, 18)))
    assert fb.widen == 2.0  # far too narrow: widened to the limit
