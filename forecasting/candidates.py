"""The candidate models a series chooses from, and how much history each needs to be fitted.

Additive seasonality and errors only where a choice exists: demand has near-zero hours at night,
and multiplicative forms cannot fit zeros. Trends are damped (ETS, MSTL's trend) so a level shift
near the end of the history is not extrapolated for 26 weeks; Theta keeps its linear drift, which
is what lets a real slow trend win, and the range guard (forecasting.guard) catches it on a
stationary history.
"""

from __future__ import annotations

from typing import Any

DAY = 24
WEEK = 168
NAIVE = ("naive_daily", "naive_weekly")
ORDER = ("naive_daily", "naive_weekly", "ets_damped", "mstl", "theta")

# Hours of training a candidate needs at the earliest backtest origin.
MIN_TRAIN = {"naive_daily": DAY, "naive_weekly": WEEK, "ets_damped": 2 * DAY, "mstl": 2 * WEEK, "theta": 2 * DAY}


def build(name: str) -> Any:
    # Imported here, not at the top: the web process reads NAIVE and ORDER to render pages, and
    # statsforecast brings pandas, scipy and pyarrow with it (only the forecast worker fits models).
    from statsforecast.models import MSTL, AutoETS, AutoTheta, SeasonalNaive

    if name == "naive_daily":
        return SeasonalNaive(season_length=DAY, alias=name)
    if name == "naive_weekly":
        return SeasonalNaive(season_length=WEEK, alias=name)
    if name == "ets_damped":
        return AutoETS(season_length=DAY, model="AAA", damped=True, alias=name)
    if name == "mstl":
        return MSTL(season_length=[DAY, WEEK], trend_forecaster=AutoETS(model="AAN", damped=True), alias=name)
    if name == "theta":
        return AutoTheta(season_length=DAY, decomposition_type="additive", alias=name)
    raise KeyError(name)


def feasible(train_hours: int) -> tuple[str, ...]:
    """Candidates that can be fitted on `train_hours` of history, in a fixed order."""
    return tuple(n for n in ORDER if train_hours >= MIN_TRAIN[n])
