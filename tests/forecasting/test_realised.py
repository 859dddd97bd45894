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
