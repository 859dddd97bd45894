"""The candidate models a series chooses from, and how much history each needs to be fitted.

Additive seasonality and errors only where a choice exists: demand has near-zero hours at night,
and multiplicative forms cannot fit zeros. Trends are damped (ETS, MSTL's trend) so a level shift
near the end of the history is not extrapolated for 26 weeks; Theta keeps its linear drift, which
is what lets a real slow trend win, and the range guard (forecasting.guard) catches it on a
stationary history.
"""

from __future__ import annotations

from typing import Any

import numpy as np

DAY = 24
WEEK = 168
NAIVE = ("naive_daily", "naive_weekly")  # the baselines every model is scored beside
# --- At the lead time (issue 32; docs/forecasting.md) -------------------------------------------------
# Planning acts 1–26 weeks ahead on weekly levels and weekly peaks, so the trend models are fitted on
# daily means (season 7: the weekly cycle) and the hour-by-hour shape comes from a robust profile of
# the recent weeks (a median, so one burst is not repeated). The naive candidates stay literal: they
# repeat the last day or the last week hour by hour, burst and Sunday included, and the guard judges them.

LEAD_ORDER = ("naive_daily", "naive_weekly", "level_shift", "ets_damped", "theta", "mstl")
# The candidates in words, for pages (the keys stay in the API, the database and the run's text).
METHOD_WORDS = {
    "naive_daily": "same hour yesterday",
    "naive_weekly": "same hour last week",
    "level_shift": "recent level after its last step",
    "ets_damped": "exponential smoothing, damped trend",
    "theta": "theta method",
    "mstl": "seasonal-trend decomposition",
    "MASE": "scaled error",  # the error measure: mean absolute error ÷ the naive forecast's
}
FITTED = ("ets_damped", "theta", "mstl")  # statsforecast models on the daily series
TRENDED = FITTED  # the candidates that can carry a level out of the recent range
PROFILE_WEEKS = 4  # recent weeks whose median shape each fitted candidate's hours follow
BREAK_P = 0.01  # a level shift counts when the two sides' weekly means differ at 1 %
MIN_STEP = 0.10  # … and by at least 10 % of the earlier level: a small wobble is not a new level
MIN_FIT_WEEKS = 3  # the fitted candidates' least training (MSTL needs two weekly seasons and some)


def build_daily(name: str) -> Any:
    from statsforecast.models import MSTL, AutoETS, AutoTheta

    if name == "ets_damped":
        return AutoETS(season_length=7, model="AAA", damped=True, alias=name)
    if name == "theta":
        return AutoTheta(season_length=7, decomposition_type="additive", alias=name)
    if name == "mstl":
        # Trend-aware: the trend after removing the weekly cycle is followed by an undamped Holt model,
        # so a real trend is carried forward (the guard holds it to the range unless it is significant).
        return MSTL(season_length=7, trend_forecaster=AutoETS(model="AAN", damped=False), alias=name)
    raise KeyError(name)


def whole(values: np.ndarray, period: int) -> np.ndarray:
    """Whole periods counted back from the end, shaped (periods, period)."""
    k = len(values) // period
    return values[len(values) - k * period :].reshape(k, period) if k else np.empty((0, period))


def profile(values: np.ndarray) -> np.ndarray:
    """Hour-of-week shape (mean 1) of the last PROFILE_WEEKS weeks: per hour the median of each week's
    value ÷ that week's mean, so a one-off burst in one week does not make the shape (hour of day under
    a week of history). Position 0 is the hour after the history ends, one period back."""
    period = WEEK if len(values) >= WEEK else DAY
    rows = whole(values, period)[-PROFILE_WEEKS:]
    means = rows.mean(axis=1, keepdims=True)
    ratios = np.divide(rows, means, out=np.ones_like(rows), where=means > 0)
    shape = np.median(ratios, axis=0)
    m = float(shape.mean())
    shape = shape / m if m > 0 else np.ones(period)
    return np.tile(shape, WEEK // period)


def hourly_from_daily(daily: np.ndarray, shape: np.ndarray, n_hours: int) -> np.ndarray:
    """Daily levels spread over their hours by the week's shape (each day's 24 ratios rescaled to mean 1)."""
    by_day = shape.reshape(7, DAY)
    day_mean = by_day.mean(axis=1, keepdims=True)
    within = np.divide(by_day, day_mean, out=np.ones_like(by_day), where=day_mean > 0)
    days = -(-n_hours // DAY)
    out = np.repeat(np.clip(daily[:days], 0.0, None), DAY) * np.tile(within.ravel(), -(-days // 7))[: days * DAY]
    return out[:n_hours]


def recent_break(values: np.ndarray) -> int | None:
    """Whole weeks back from the end where the most significant level shift happened (Welch's t on the
    weekly means either side, at least two weeks each side), or None when no split is significant."""
    means = whole(values, WEEK).mean(axis=1)
    k = len(means)
    if k < 4:
        return None
    from scipy import stats  # on use: the web process imports this module, and scipy is heavy

    # Every split at once (one t.sf call: this runs at every backtest origin of every series).
    splits = np.arange(2, k - 1)
    csum, csq = np.cumsum(means), np.cumsum(means**2)
    na, nb = splits.astype(float), (k - splits).astype(float)
    ma, mb = csum[splits - 1] / na, (csum[-1] - csum[splits - 1]) / nb
    var_a = np.maximum((csq[splits - 1] - na * ma**2) / (na - 1), 0.0)
    var_b = np.maximum((csq[-1] - csq[splits - 1] - nb * mb**2) / np.maximum(nb - 1, 1), 0.0)
    va, vb = var_a / na, var_b / nb
    diff = np.abs(ma - mb)
    se = va + vb
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = se**2 / (va**2 / (na - 1) + vb**2 / np.maximum(nb - 1, 1))
        p = np.where(
            se > 0, 2 * stats.t.sf(diff / np.sqrt(se), np.where(se > 0, dof, 1.0)), np.where(diff > 0, 0.0, 1.0)
        )
    ok = (p < BREAK_P) & (diff >= MIN_STEP * np.abs(ma))
    best: tuple[float, int] | None = None
    if ok.any():
        # the most significant split; on a tie the earliest, as the loop it replaces chose
        i = int(np.flatnonzero(ok)[np.argmin(p[ok])])
        best = (float(p[i]), int(k - splits[i]))
    if best is None:
        return None
    # A steady trend also splits significantly: a step counts only where it fits the weekly means better
    # than one straight line does.
    split = k - best[1]
    step = np.concatenate([np.full(split, means[:split].mean()), np.full(k - split, means[split:].mean())])
    x = np.arange(k, dtype=float)
    line = np.polyval(np.polyfit(x, means, 1), x)
    return best[1] if np.sum((means - step) ** 2) < np.sum((means - line) ** 2) else None


def since_break(values: np.ndarray) -> np.ndarray:
    """The history after a recent level shift when at least MIN_FIT_WEEKS are left, else all of it: what
    the fitted candidates and the trend test see, so a step is not read as a slope."""
    back = recent_break(values)
    return values[-back * WEEK :] if back is not None and back >= MIN_FIT_WEEKS else values


def level_shift(values: np.ndarray, n_hours: int, shape: np.ndarray | None = None) -> np.ndarray:
    """The mean level since the most recent significant shift (the last PROFILE_WEEKS weeks without one)
    times the recent shape (profile(values), passed in when the caller has it): a candidate that follows a
    step and never invents a slope."""
    back = recent_break(values)
    weeks = whole(values, WEEK)
    if len(weeks):
        level = float(weeks[-(back or PROFILE_WEEKS) :].mean())
    else:
        level = float(whole(values, DAY).mean()) if len(values) >= DAY else float(values.mean())
    shape = profile(values) if shape is None else shape
    return level * np.tile(shape, -(-n_hours // WEEK))[:n_hours]


def repeat(values: np.ndarray, period: int, n_hours: int) -> np.ndarray:
    """Seasonal naive, literally: the last `period` hours again and again."""
    last = values[-period:]
    return np.tile(last, -(-n_hours // period))[:n_hours]


def custom_path(name: str, values: np.ndarray, n_hours: int, shape: np.ndarray | None = None) -> np.ndarray:
    if name == "naive_daily":
        return repeat(values, DAY, n_hours)
    if name == "naive_weekly":
        return repeat(values, WEEK if len(values) >= WEEK else DAY, n_hours)
    if name == "level_shift":
        return level_shift(values, n_hours, shape)
    raise KeyError(name)
