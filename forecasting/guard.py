"""No invented trends: a stationary history keeps its forecast inside its own range, widened by the band.

A history is stationary when the slope of its weekly means (whole weeks, counted back from the
end, so the weekly cycle cancels) is not significant at 1 %. A short history (under three whole
weeks) shows no trend to trust, so it counts as stationary too.

The range is taken over weekly means (daily means under a week of history): hourly values swing
with the daily cycle, so an hourly range would let a forecast lose half its level unnoticed. On a
stationary history, a forecast whose weekly mean P50 leaves [min − w, max + w] of the history's
weekly means is replaced by a seasonal-naive forecast, and the series says so. w is the interval
the model earned in its backtest at the same grain (its largest miss of a week's mean demand over
the selection origins), not its own stated band: Theta's stated 98 % band is several times the
level itself and would let any drift through.
"""

from __future__ import annotations

import numpy as np

from forecasting.candidates import DAY, WEEK

SIGNIFICANCE = 0.01


def is_stationary(values: np.ndarray) -> bool:
    k = len(values) // WEEK
    if k < 3:
        return True
    means = values[len(values) - k * WEEK :].reshape(k, WEEK).mean(axis=1)
    from scipy import stats  # on use: the web process imports this module, and scipy is heavy

    fit = stats.linregress(np.arange(k, dtype=float), means)
    if fit.stderr == 0:
        return bool(fit.slope == 0)
    return bool(fit.pvalue >= SIGNIFICANCE)


def _means(values: np.ndarray, period: int) -> np.ndarray:
    """Means of the whole periods, counted back from the end for a history, forward for a forecast."""
    k = len(values) // period
    return values[: k * period].reshape(k, period).mean(axis=1) if k else np.empty(0)


def leaves_range(history: np.ndarray, p50: np.ndarray, width: float) -> bool:
    """Both sides at one grain: weekly means, or daily under a week of history. A forecast shorter
    than one period has no mean at that grain and is not judged."""
    period = WEEK if len(history) >= WEEK else DAY
    past = _means(history[len(history) % period :], period)
    ahead = _means(p50, period)
    if not len(past) or not len(ahead):
        return False
    return bool(ahead.min() < past.min() - width or ahead.max() > past.max() + width)
