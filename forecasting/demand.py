"""What a series forecast is, and the scenarios built from many: expected = P50, upside = P90, stress =
P99 × a correlated spike. The forecasts themselves come from forecasting.pipeline (the job's one path).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from forecasting import selection
from forecasting.candidates import DAY, WEEK

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
    backtest: selection.LeadBacktest | None = None
    note: str = ""


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
