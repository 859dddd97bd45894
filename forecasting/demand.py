"""Demand forecasts: per series, the candidate that won an honest backtest, guarded against invented trends.

No database here: series in, forecasts out, so the job, the tests and the benchmark run the same
code. Selection (forecasting.selection) picks a method per series; the winner is refitted on the
whole history and forecast once per method group. Scenarios come from the bands: expected = P50,
upside = P90, stress = P99 × a correlated spike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from forecasting import guard, selection
from forecasting.candidates import DAY, NAIVE, ORDER, WEEK, build
from forecasting.history import DemandSeries

MIN_HISTORY = 2 * DAY  # below two days there is no daily shape to learn


@dataclass
class SeriesForecast:
    key: tuple[str, str, str]
    method: str
    history_hours: int
    start: datetime
    p50: np.ndarray
    p90: np.ndarray
    p99: np.ndarray
    history_tail: np.ndarray
    backtest: selection.Backtest | None = None
    note: str = ""


def _forecast(method: str, batch: list[DemandSeries], h: int, n_jobs: int) -> list[tuple[np.ndarray, ...]]:
    """One StatsForecast call for every series that uses `method`: (P50, hi-80, hi-98) per series."""
    # Imported on use: the web process imports this module and must not load pandas/scipy/pyarrow.
    from statsforecast import StatsForecast
    from statsforecast.models import SeasonalNaive

    sf = StatsForecast(models=[build(method)], freq="h", n_jobs=n_jobs, fallback_model=SeasonalNaive(season_length=DAY))
    fc = sf.forecast(df=selection.frame(batch), h=h, level=selection.LEVELS).sort_values(["unique_id", "ds"])
    cols = [fc[c].to_numpy(dtype=float).reshape(len(batch), h) for c in (method, f"{method}-hi-80", f"{method}-hi-98")]
    return [tuple(c[j] for c in cols) for j in range(len(batch))]


def _fallback(s: DemandSeries) -> str:
    """Weekly seasonal-naive repeats the last week, so its weekly mean is the history's own; under a
    week of history, the daily one."""
    return "naive_weekly" if len(s.values) >= WEEK else "naive_daily"


def _by_method(
    batch: list[DemandSeries], methods: list[str], idx: list[int], h: int, n_jobs: int
) -> dict[int, tuple[np.ndarray, ...]]:
    groups: dict[str, list[int]] = {}
    for i in idx:
        groups.setdefault(methods[i], []).append(i)
    out = {}
    for method, ids in groups.items():
        for i, arrays in zip(ids, _forecast(method, [batch[i] for i in ids], h, n_jobs), strict=True):
            out[i] = arrays
    return out


def _calibrated(raw: tuple[np.ndarray, ...], test: selection.Backtest | None) -> tuple[np.ndarray, ...]:
    c = test.chosen if test is not None else None
    p50, hi80, hi98 = raw
    return selection.bands(p50, hi80, hi98, c.resid_q90 if c else 0.0, c.resid_q99 if c else 0.0)


def forecast_batch(
    batch: list[DemandSeries], *, horizon_h: int, n_jobs: int = 1, candidates: tuple[str, ...] = ORDER
) -> list[SeriesForecast]:
    """Backtest the candidates, forecast each series with its winner, fall back where the guard says."""
    tests = selection.backtest_batch(batch, n_jobs=n_jobs, candidates=candidates)
    methods = [t.method if t is not None else _fallback(s) for s, t in zip(batch, tests, strict=True)]
    notes = ["" if t is not None else "history too short to backtest: seasonal-naive" for t in tests]
    bands = _by_method(batch, methods, list(range(len(batch))), horizon_h, n_jobs)
    out_of_range = []
    for i, s in enumerate(batch):
        p50, p90, p99 = bands[i] = _calibrated(bands[i], tests[i])
        c = tests[i].chosen if tests[i] is not None else None  # type: ignore[union-attr]  # tested on the same index
        # Without a backtest the width falls back to the model's own first-week band.
        width = c.weekly_miss if c is not None else float(np.mean(p99[:WEEK] - p50[:WEEK]))
        if methods[i] not in NAIVE and guard.is_stationary(s.values) and guard.leaves_range(s.values, p50, width):
            out_of_range.append(i)
    for i in out_of_range:
        fb = _fallback(batch[i])
        notes[i] = f"{methods[i]} left the range of a stationary history: forecast with {fb}"
        methods[i] = fb
        tests[i] = tests[i].switch(fb) if tests[i] is not None else None  # type: ignore[union-attr]  # as above
    for i, arrays in _by_method(batch, methods, out_of_range, horizon_h, n_jobs).items():
        bands[i] = _calibrated(arrays, tests[i])
    return [
        SeriesForecast(
            key=s.key,
            method=methods[i],
            history_hours=len(s.values),
            start=s.start + timedelta(hours=len(s.values)),
            p50=bands[i][0],
            p90=bands[i][1],
            p99=bands[i][2],
            history_tail=s.values[-WEEK:],
            backtest=tests[i],
            note=notes[i],
        )
        for i, s in enumerate(batch)
    ]


def day_profile(forecasts: list[SeriesForecast]) -> np.ndarray:
    """Total expected demand (P50, first week) by hour of day (UTC): additive over any split of the series."""
    profile = np.zeros(DAY)
    for f in forecasts:
        first = f.start.hour
        for h in range(min(len(f.p50), WEEK)):
            profile[(first + h) % DAY] += f.p50[h]
    return profile


def peak_hours(profile: np.ndarray, n_hours: int) -> list[int]:
    """The `n_hours` hours of day where a day_profile peaks."""
    if n_hours <= 0:
        return []
    return sorted(int(h) for h in np.argsort(-profile, kind="stable")[:n_hours])


def spike_hours(forecasts: list[SeriesForecast], n_hours: int) -> list[int]:
    """Hours of the day (UTC) where total expected demand peaks: the stress spike hits them all at once."""
    return peak_hours(day_profile(forecasts), n_hours) if forecasts else []


def uplift(start: datetime, n: int, *, spike_pct: float, hours: list[int]) -> np.ndarray:
    """The stress factor of each of n hours from `start`: 1 + spike_pct % at the spike hours, else 1."""
    hour_of_day = (start.hour + np.arange(n)) % DAY
    return np.where(np.isin(hour_of_day, hours), 1.0 + spike_pct / 100.0, 1.0)


def stress(f: SeriesForecast, *, spike_pct: float, hours: list[int]) -> np.ndarray:
    """P99 with a correlated spike: the same uplift at the same hours of day for every series."""
    return f.p99 * uplift(f.start, len(f.p99), spike_pct=spike_pct, hours=hours)
