"""Forecasts at the lead time (issue 32) on series the old suite never saw: a trend of +35 % per 8 weeks,
a level shift, a noisy seasonal series and a bursty one, each 20 weeks of history with 26 weeks of
truth held back, plus the two shapes the old guard let through. One pipeline call for all of them
(statsforecast's JIT warm-up is the expensive part), shared by every test here; no database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from forecasting import guard, pipeline, selection
from forecasting.candidates import LEAD_ORDER, WEEK
from forecasting.history import DemandSeries
from tests.forecasting.helpers import cycles_cu

START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday: 20 whole weeks end on a Sunday night
HIST, AHEAD = 20, 26


def _truths() -> dict[str, np.ndarray]:
    n = (HIST + AHEAD) * WEEK
    shift = cycles_cu(n, base=10, seed=1)
    shift[(HIST - 6) * WEEK :] *= 1.6  # a step up six weeks before the end, and it stays
    young = cycles_cu(n, base=10, seed=5)
    young[int((HIST - 1.6) * WEEK) :] *= 1.25  # a step up 1.6 weeks (11 days) before the end (issue 47)
    seasonal = cycles_cu(n, base=10, seed=2) * np.random.default_rng(0).lognormal(0, 0.25, n)
    bursty = cycles_cu(n, base=10, seed=3)
    rng = np.random.default_rng(9)
    bursty[rng.choice(n, 12, replace=False)] *= 4
    bursty[HIST * WEEK - 30] = 55.0  # a one-off burst in the last week (about 3.5x the usual peak)
    return {
        "trend": cycles_cu(n, base=10, trend_per_week=0.35 / 8, seed=0),
        "shift": shift,
        "young": young,
        "seasonal": seasonal,
        "bursty": bursty,
        # Weekends at 40 %: the last day (a Sunday) is about half the weekly mean.
        "sunday": cycles_cu(n, base=10, weekend=0.4, seed=4),
    }


TRUTHS = _truths()
HIDDEN = ("trend", "shift", "young", "seasonal", "bursty", "sunday")


@pytest.fixture(scope="module")
def forecasts() -> dict[str, object]:
    batch = [DemandSeries(k, "m", "r", START, v[: HIST * WEEK]) for k, v in TRUTHS.items()]
    # The last two again, each told by earlier runs that a naive method was perfect, so the naive
    # method ranks first and only the guard stands between it and the forecast.
    batch += [
        DemandSeries(f"{k}-ranked-naive", "m", "r", START, TRUTHS[k][: HIST * WEEK]) for k in ("bursty", "sunday")
    ]
    feedback = [pipeline.Feedback()] * len(TRUTHS) + [
        pipeline.Feedback({"naive_weekly": 0.0}),
        pipeline.Feedback({"naive_daily": 0.0}),
    ]
    out = pipeline.forecast_batch(batch, horizon_h=AHEAD * WEEK, lead_weeks=[26] * len(batch), feedback=feedback)
    return {f.key[0]: f for f in out}


def _weeks(values: np.ndarray) -> np.ndarray:
    return values.reshape(-1, WEEK).mean(axis=1)


def _mase(forecast: np.ndarray, name: str, h: int) -> float:
    truth = _weeks(TRUTHS[name][HIST * WEEK :])
    scale = selection.mase_scale(TRUTHS[name][: HIST * WEEK])
    return float(np.mean(np.abs(_weeks(forecast)[:h] - truth[:h])) / scale)


@pytest.mark.parametrize("name", HIDDEN)
@pytest.mark.parametrize("h", [13, 26])
def test_mase_at_13_and_26_weeks_is_at_or_below_seasonal_naives(forecasts, name, h):
    seasonal_naive = np.tile(TRUTHS[name][(HIST - 1) * WEEK : HIST * WEEK], AHEAD)
    assert _mase(forecasts[name].p50, name, h) <= _mase(seasonal_naive, name, h)


def test_the_trend_is_followed_to_week_26(forecasts):
    f = forecasts["trend"]
    truth = _weeks(TRUTHS["trend"][HIST * WEEK :])[-1]
    # Issue 47's must-show: within 10 % at the lead time (theta lands at -1.5 % on this seeded series).
    assert abs(_weeks(f.p50)[-1] / truth - 1) <= 0.10
    # and it may leave the recent range only because the trend is significant in the backtest
    assert f.backtest.trend["significant"] is True
    assert f.method in ("ets_damped", "theta", "mstl")


def test_the_level_shift_is_fitted_after_the_step(forecasts):
    f = forecasts["shift"]
    assert f.note.startswith("level shift")
    assert abs(_weeks(f.p50)[0] / _weeks(TRUTHS["shift"][HIST * WEEK :])[0] - 1) <= 0.1


def test_guard_refuses_the_sunday_naive_daily_path():
    # Given a history ending on a Sunday at half the weekly level, when naive_daily repeats that day
    values = TRUTHS["sunday"][: HIST * WEEK]
    repeated = np.tile(values[-24:], AHEAD * 7)
    drop = _weeks(repeated)[0] / _weeks(values)[-1] - 1
    assert drop < -0.45
    # Then its weekly level leaves the band in week 1
    assert guard.refusal(repeated, guard.band(values, AHEAD, trend_carries=False)).startswith("week 1 level")


def test_guard_refuses_the_repeated_burst():
    values = TRUTHS["bursty"][: HIST * WEEK]
    repeated = np.tile(values[-WEEK:], AHEAD)
    assert repeated.reshape(AHEAD, WEEK).max(axis=1)[0] == 55.0
    assert guard.refusal(repeated, guard.band(values, AHEAD, trend_carries=False)).startswith("week 1 peak")


def test_a_naive_method_ranked_first_still_goes_through_the_guard(forecasts):
    # The burst: naive_weekly ranked first by feedback is refused; no forecast week peaks near the burst
    f = forecasts["bursty-ranked-naive"]
    assert f.method != "naive_weekly"
    assert "naive_weekly refused" in f.note
    usual = np.median(TRUTHS["bursty"][: HIST * WEEK].reshape(HIST, WEEK).max(axis=1)[-4:])
    assert f.p50.reshape(AHEAD, WEEK).max(axis=1).max() <= usual * (1 + guard.BAND)
    # The Sunday: naive_daily ranked first is refused; every week stays within the band of recent levels
    f = forecasts["sunday-ranked-naive"]
    assert f.method != "naive_daily"
    recent = _weeks(TRUTHS["sunday"][: HIST * WEEK])[-4:]
    assert _weeks(f.p50).min() >= recent.min() * (1 - guard.BAND)


@pytest.mark.parametrize("name", HIDDEN)
def test_p90_coverage_on_the_backtest_is_calibrated(forecasts, name):
    assert 0.85 <= forecasts[name].backtest.coverage["p90"] <= 0.95


def test_twenty_weeks_score_three_horizons_and_say_which_not(forecasts):
    t = forecasts["seasonal"].backtest
    assert t.plan.horizons == (1, 4, 13)
    assert [r["method"] for r in t.candidates] == list(LEAD_ORDER)
    assert set(t.row(t.method)["errors"]) == {"1", "4", "13"}
    assert t.runner_up is not None and t.runner_up != t.method
    assert "scored at 1, 4, 13 weeks" in t.why


def test_horizons_the_history_can_score():
    assert selection.lead_plan(4 * WEEK) is None
    assert selection.lead_plan(5 * WEEK).horizons == (1,)
    assert selection.lead_plan(8 * WEEK).horizons == (1, 4)
    assert selection.lead_plan(30 * WEEK).horizons == (1, 4, 13, 26)
    # the last origin is the holdout: the longest horizon ends exactly at the history's end
    p = selection.lead_plan(30 * WEEK)
    assert (p.origins[-1] + 26 * WEEK, len(p.origins)) == (30 * WEEK, 2)


def test_errors_are_weighted_toward_the_lead_time():
    w = selection.horizon_weights((1, 4, 13, 26), 26)
    assert max(w, key=w.get) == 26 and w[1] < w[4] < w[13] < w[26]
    w = selection.horizon_weights((1, 4, 13, 26), 4)
    assert max(w, key=w.get) == 4


def test_a_trend_carries_the_band_only_when_significant_in_the_backtest(forecasts):
    # The trend series' own path leaves the recent range and passes only with the trend carrying
    values = TRUTHS["trend"][: HIST * WEEK]
    f = forecasts["trend"]
    assert guard.refusal(f.p50, guard.band(values, AHEAD, trend_carries=False)) != ""
    assert guard.refusal(f.p50, guard.band(values, AHEAD, trend_carries=True)) == ""
    # and on the stationary seasonal series the backtest does not make its slope significant
    assert pipeline._trend_carries(TRUTHS["seasonal"][: HIST * WEEK], forecasts["seasonal"].backtest)[0] is False


def test_the_backtest_chart_is_the_chosen_methods_holdout_forecast_against_what_happened(forecasts):
    # The planning page's small chart: the forecast the chosen method made 13 weeks before the end
    # (the last origin) against the realised weekly means, the same numbers its holdout error scores
    t = forecasts["seasonal"].backtest
    chart = t.chart()
    values = TRUTHS["seasonal"][: HIST * WEEK]
    assert chart["made_weeks_ago"] == 13
    assert chart["actual"] == pytest.approx(_weeks(values[(HIST - 13) * WEEK :]), abs=1e-4)
    error = np.mean(np.abs(np.asarray(chart["forecast"]) - chart["actual"])) / selection.mase_scale(values)
    assert error == pytest.approx(t.row(t.method)["holdout_errors"]["13"], abs=1e-3)


def test_a_significant_slope_carries_only_when_a_trend_model_beats_every_flat_one():
    # The trend series' slope is significant at 1 %; whether it may carry the band is the backtest's call
    values = TRUTHS["trend"][: HIST * WEEK]

    class Scored:  # the two numbers _trend_carries reads from a backtest: the longest horizon's errors
        def __init__(self, trended: float, flat: float) -> None:
            self.plan = selection.lead_plan(len(values))
            self.errors = {n: trended if n in ("ets_damped", "theta", "mstl") else flat for n in LEAD_ORDER}

        def row(self, n: str) -> dict:
            return {"errors": {str(self.plan.weeks): self.errors[n]}}

    assert guard.trend_slope(values)[2] < guard.SIGNIFICANCE
    assert pipeline._trend_carries(values, Scored(trended=0.5, flat=0.8))[0] is True
    carries, info = pipeline._trend_carries(values, Scored(trended=0.9, flat=0.8))
    assert (carries, info["significant"]) == (False, False)


def test_a_young_level_shift_is_seen_and_the_level_re_anchored(forecasts):
    # Issue 47: a step 1.6 weeks back was averaged away (−20 % for 26 weeks). Now it is seen on daily levels,
    f = forecasts["young"]
    assert "level shift 11 days ago (+2" in f.note
    # the forecast starts at the level that followed it, and stays there to week 26
    truth = _weeks(TRUTHS["young"][HIST * WEEK :])
    assert np.all(np.abs(_weeks(f.p50) / truth - 1) <= 0.1)
    # and the bands are wider than the same series' without the step would be, while the step is young
    steady = pipeline.forecast_batch(
        [
            DemandSeries(
                "steady",
                "m",
                "r",
                START,
                TRUTHS["young"][: HIST * WEEK]
                / np.where(np.arange(HIST * WEEK) >= int((HIST - 1.6) * WEEK), 1.25, 1.0),
            )
        ],
        horizon_h=AHEAD * WEEK,
        lead_weeks=[26],
    )[0]
    assert np.mean(f.p90 / f.p50) > np.mean(steady.p90 / steady.p50) + 0.1


def test_the_chosen_model_never_loses_to_the_best_guard_passing_naive_on_the_holdout(forecasts):
    for name, f in forecasts.items():
        t = f.backtest
        naive = [t.row(n)["holdout_error"] for n in ("naive_daily", "naive_weekly") if not t.row(n)["refused"]]
        if naive:
            assert t.holdout_error <= 1.1 * min(naive) + 1e-9, (name, t.method, t.candidates)
