"""Demand forecasts with statsforecast: many series per call, prediction intervals, a backtest.

No database here: series in, forecasts out, so the job, the tests and the benchmark run the same
code. Scenarios come from the intervals: expected = P50 (the point forecast), upside = P90 (upper
end of the 80 % interval), stress = P99 (upper end of the 98 % interval) × a correlated spike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
from statsforecast import StatsForecast
from statsforecast.models import MSTL, AutoETS, SeasonalNaive

from forecasting.history import DemandSeries

DAY = 24
WEEK = 168
LEVELS = [80, 98]
BACKTEST_H = WEEK
MIN_HISTORY = 2 * DAY  # below two days there is no daily shape to learn
MSTL_MIN = 2 * WEEK  # MSTL needs two full weekly seasons


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
    backtest: dict[str, float | None] = field(default_factory=dict)


def method_for(n_hours: int) -> str:
    return "mstl" if n_hours >= MSTL_MIN else "ets"


def _model(method: str) -> MSTL | AutoETS:
    # Additive seasonality only: demand has zero hours at night and multiplicative ETS cannot fit zeros.
    if method == "mstl":
        return MSTL(season_length=[DAY, WEEK], trend_forecaster=AutoETS(model="ZZN"), alias="main")
    return AutoETS(season_length=DAY, model="ZZA", alias="main")


def _frame(batch: list[DemandSeries], cut: int = 0) -> pd.DataFrame:
    """Long frame for statsforecast; `cut` drops the last hours (the backtest's held-out week)."""
    parts = []
    for i, s in enumerate(batch):
        y = s.values[: len(s.values) - cut] if cut else s.values
        ds = pd.date_range(s.start.replace(tzinfo=None), periods=len(y), freq="h")
        parts.append(pd.DataFrame({"unique_id": i, "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


def _by_id(frame: pd.DataFrame, column: str, n: int, h: int) -> np.ndarray:
    """statsforecast returns rows ordered by unique_id then ds: reshape one column to (n, h)."""
    ordered = frame.sort_values(["unique_id", "ds"])
    return np.clip(ordered[column].to_numpy(dtype=float).reshape(n, h), 0.0, None)


def _run(method: str, frame: pd.DataFrame, h: int, n_jobs: int, baseline: bool) -> pd.DataFrame:
    models = [_model(method)] + ([SeasonalNaive(season_length=DAY, alias="naive")] if baseline else [])
    sf = StatsForecast(models=models, freq="h", n_jobs=n_jobs, fallback_model=SeasonalNaive(season_length=DAY))
    return sf.forecast(df=frame, h=h, level=LEVELS if not baseline else [80])


def mape(actual: np.ndarray, predicted: np.ndarray) -> float | None:
    """Mean absolute percentage error over the hours that had demand (0-demand hours have no %)."""
    mask = actual > 0
    if not mask.any():
        return None
    return float(np.mean(np.abs(actual[mask] - predicted[mask]) / actual[mask]))


def backtest_batch(batch: list[DemandSeries], *, n_jobs: int = 1) -> list[dict[str, float | None]]:
    """Fit on all but the last 7 days, forecast them, compare with what arrived and with seasonal-naive."""
    out: list[dict[str, float | None]] = [
        {"mape": None, "coverage_80": None, "baseline_mape": None, "resid_q90": None, "resid_q99": None} for _ in batch
    ]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(batch):
        train = len(s.values) - BACKTEST_H
        if train >= MIN_HISTORY:
            groups.setdefault(method_for(train), []).append(i)
    for method, idx in groups.items():
        sub = [batch[i] for i in idx]
        fc = _run(method, _frame(sub, cut=BACKTEST_H), BACKTEST_H, n_jobs, baseline=True)
        pred, lo, hi = (_by_id(fc, c, len(sub), BACKTEST_H) for c in ("main", "main-lo-80", "main-hi-80"))
        naive = _by_id(fc, "naive", len(sub), BACKTEST_H)
        for j, i in enumerate(idx):
            actual = batch[i].values[-BACKTEST_H:]
            resid = actual - pred[j]
            out[i] = {
                "mape": mape(actual, pred[j]),
                "coverage_80": float(np.mean((actual >= lo[j]) & (actual <= hi[j]))),
                "baseline_mape": mape(actual, naive[j]),
                "resid_q90": float(np.quantile(resid, 0.90)),
                "resid_q99": float(np.quantile(resid, 0.99)),
            }
    return out


def forecast_batch(
    batch: list[DemandSeries], *, horizon_h: int, n_jobs: int = 1, backtest: bool = True
) -> list[SeriesForecast]:
    """One StatsForecast call per method over the whole batch (plus one for the backtest)."""
    results: list[SeriesForecast | None] = [None] * len(batch)
    tests = backtest_batch(batch, n_jobs=n_jobs) if backtest else [{} for _ in batch]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(batch):
        groups.setdefault(method_for(len(s.values)), []).append(i)
    for method, idx in groups.items():
        sub = [batch[i] for i in idx]
        fc = _run(method, _frame(sub), horizon_h, n_jobs, baseline=False)
        p50, p90, p99 = (_by_id(fc, c, len(sub), horizon_h) for c in ("main", "main-hi-80", "main-hi-98"))
        for j, i in enumerate(idx):
            s = batch[i]
            # Model intervals can be too narrow (MSTL's come from the trend model alone). Where the
            # backtest week saw larger misses, its residual quantiles set the floor of the upper bands.
            q90, q99 = tests[i].get("resid_q90") or 0.0, tests[i].get("resid_q99") or 0.0
            hi80 = np.maximum(p90[j], p50[j] + max(q90, 0.0))
            hi98 = np.maximum(p99[j], p50[j] + max(q99, 0.0))
            results[i] = SeriesForecast(
                key=s.key,
                method=method,
                history_hours=len(s.values),
                start=s.start + timedelta(hours=len(s.values)),
                # An interval can cross below the point forecast after clipping at 0; keep P50 ≤ P90 ≤ P99.
                p50=p50[j],
                p90=np.maximum(hi80, p50[j]),
                p99=np.maximum(hi98, np.maximum(hi80, p50[j])),
                history_tail=s.values[-WEEK:],
                backtest=tests[i],
            )
    return [r for r in results if r is not None]


def spike_hours(forecasts: list[SeriesForecast], n_hours: int) -> list[int]:
    """Hours of the day (UTC) where total expected demand peaks: the stress spike hits them all at once."""
    if not forecasts or n_hours <= 0:
        return []
    profile = np.zeros(DAY)
    for f in forecasts:
        first = f.start.hour
        for h in range(min(len(f.p50), WEEK)):
            profile[(first + h) % DAY] += f.p50[h]
    return sorted(int(h) for h in np.argsort(-profile, kind="stable")[:n_hours])


def stress(f: SeriesForecast, *, spike_pct: float, hours: list[int]) -> np.ndarray:
    """P99 with a correlated spike: the same uplift at the same hours of day for every series."""
    hour_of_day = (f.start.hour + np.arange(len(f.p99))) % DAY
    uplift = np.where(np.isin(hour_of_day, hours), 1.0 + spike_pct / 100.0, 1.0)
    return f.p99 * uplift
