"""The forecast guard (forecasting/pipeline.py, docs/forecasting.md): every candidate's weekly level and
peak at every horizon, naive ones included, before it can be chosen.
"""

from __future__ import annotations

import numpy as np

from forecasting.candidates import DAY, WEEK

SIGNIFICANCE = 0.01

# --- Levels and peaks at every horizon (issue 32; docs/forecasting.md) ----------------------------------
# Every candidate, the naive ones included, passes this before it can be chosen. Recent history is the
# last RECENT_WEEKS whole weeks: a forecast week's mean must lie within [min level × (1 − BAND), max
# level × (1 + BAND)] of those weeks, and its peak hour within [min peak × (1 − BAND), median peak ×
# (1 + BAND)]: the median, so a one-off burst in one recent week is not a peak the band allows again.
# A trend may carry both bounds outwards, week by week, only when it is significant: the weekly
# means' slope at 1 % and a trend-following candidate beating every flat one at the longest horizon
# the backtest scored. The bound then moves by the slope's far 99 % confidence limit per week.

RECENT_WEEKS = 4
BAND = 0.25


def weekly(path: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, peak) of each whole week of a forecast path, counted forward."""
    k = len(path) // WEEK
    weeks = path[: k * WEEK].reshape(k, WEEK)
    return weeks.mean(axis=1), weeks.max(axis=1)


def trend_slope(values: np.ndarray) -> tuple[float, float, float]:
    """(slope, far 99 % limit, p-value) of the whole weeks' means per week; (0, 0, 1) under three weeks."""
    k = len(values) // WEEK
    if k < 3:
        return 0.0, 0.0, 1.0
    means = values[len(values) - k * WEEK :].reshape(k, WEEK).mean(axis=1)
    from scipy import stats

    fit = stats.linregress(np.arange(k, dtype=float), means)
    if fit.stderr == 0:
        return float(fit.slope), float(fit.slope), 0.0 if fit.slope else 1.0
    far = float(fit.slope + np.sign(fit.slope) * stats.t.ppf(0.995, k - 2) * fit.stderr)
    return float(fit.slope), far, float(fit.pvalue)


def band(values: np.ndarray, n_weeks: int, trend_carries: bool) -> dict[str, list[float]]:
    """Per forecast week: the allowed [low, high] of the weekly level and of the weekly peak."""
    period = WEEK if len(values) >= WEEK else DAY
    rows = values[len(values) - (len(values) // period) * period :].reshape(-1, period)[-RECENT_WEEKS:]
    levels, peaks = rows.mean(axis=1), rows.max(axis=1)
    slope = trend_slope(values)[1] if trend_carries else 0.0
    # Weeks from the middle of the recent window to forecast week k.
    dist = np.arange(1, n_weeks + 1) + (len(rows) - 1) / 2
    up, down = np.maximum(slope, 0.0) * dist, np.minimum(slope, 0.0) * dist
    ratio = float(np.median(peaks) / np.mean(levels)) if np.mean(levels) > 0 else 1.0
    return {
        "level_low": list(np.maximum(levels.min() * (1 - BAND) + down, 0.0)),
        "level_high": list(levels.max() * (1 + BAND) + up),
        "peak_low": list(np.maximum(peaks.min() * (1 - BAND) + down * ratio, 0.0)),
        "peak_high": list(np.median(peaks) * (1 + BAND) + up * ratio),
    }


def refusal(path: np.ndarray, allowed: dict[str, list[float]]) -> str:
    """'' when every forecast week's level and peak are inside the band, else the first week that is not."""
    level, peak = weekly(path)
    for k in range(len(level)):
        for name, v in (("level", level[k]), ("peak", peak[k])):
            lo, hi = allowed[f"{name}_low"][k], allowed[f"{name}_high"][k]
            if not lo - 1e-9 <= v <= hi + 1e-9:
                return f"week {k + 1} {name} {v:.2f} outside {lo:.2f}–{hi:.2f}"
    return ""
