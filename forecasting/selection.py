"""Honest model selection: rolling one-week backtest origins, chosen on the earlier, scored on the last.

Every candidate is refitted at every origin (statsforecast's cross_validation). The winner is the
lowest error over the selection origins; the last origin is the holdout, which no candidate saw
when the choice was made, so the reported holdout error is what the chosen model does on new data.
Bands are calibrated on the selection origins too (a model's own interval can be too narrow) and
their coverage is measured on the holdout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from forecasting.candidates import DAY, ORDER, WEEK, build, feasible
from forecasting.history import DemandSeries

if TYPE_CHECKING:
    import pandas as pd

H = WEEK  # each origin forecasts one week ahead
LEVELS = [80, 98]  # upper ends: the 90th and 99th percentiles
ERROR_METRIC = "wape"  # Σ|actual − forecast| ÷ Σ actual: defined at zero-demand hours, unlike MAPE


@dataclass(frozen=True)
class Calibration:
    """One candidate's bands as its selection origins calibrated them, and their holdout coverage."""

    coverage: dict[str, float]
    resid_q90: float  # upward residual quantiles over the selection origins: band floors
    resid_q99: float
    weekly_miss: float  # largest miss of a week's mean demand over the selection origins


@dataclass
class Backtest:
    method: str
    candidates: list[dict[str, float | str | None]]
    calibration: dict[str, Calibration] = field(default_factory=dict)

    @property
    def selection_errors(self) -> dict[str, float]:
        return {
            str(r["method"]): float(r["selection_error"]) for r in self.candidates if r["selection_error"] is not None
        }

    @property
    def holdout_error(self) -> float | None:
        return next((r["holdout_error"] for r in self.candidates if r["method"] == self.method), None)  # type: ignore[return-value]

    @property
    def chosen(self) -> Calibration | None:
        return self.calibration.get(self.method)

    def switch(self, method: str) -> Backtest:
        """The same backtest reporting another method (a guard's fallback)."""
        return replace(self, method=method)


def plan(n_hours: int, allowed: tuple[str, ...] = ORDER) -> tuple[int, tuple[str, ...]] | None:
    """(origins, candidates): three origins when MSTL still has two weeks to train at the first,
    else two; None when not even one selection origin and a holdout fit."""
    for windows, min_train in ((3, 2 * WEEK), (2, 2 * WEEK), (2, 2 * DAY)):
        names = tuple(n for n in feasible(n_hours - windows * H) if n in allowed)
        if n_hours - windows * H >= min_train and names:
            return windows, names
    return None


def wape(actual: np.ndarray, predicted: np.ndarray) -> float | None:
    total = float(np.abs(actual).sum())
    if total <= 0:
        return None
    return float(np.abs(actual - predicted).sum() / total)


def frame(batch: list[DemandSeries]) -> pd.DataFrame:
    # Imported on use: the web process imports this module and must not load pandas/scipy/pyarrow.
    import pandas as pd

    parts = []
    for i, s in enumerate(batch):
        ds = pd.date_range(s.start.replace(tzinfo=None), periods=len(s.values), freq="h")
        parts.append(pd.DataFrame({"unique_id": i, "ds": ds, "y": s.values}))
    return pd.concat(parts, ignore_index=True)


def bands(p50: np.ndarray, hi80: np.ndarray, hi98: np.ndarray, q90: float, q99: float) -> tuple[np.ndarray, ...]:
    """P50 ≤ P90 ≤ P99, none below zero; the model's upper bands raised to the calibrated floors."""
    p50 = np.clip(p50, 0.0, None)
    p90 = np.maximum(np.clip(hi80, 0.0, None), p50 + max(q90, 0.0))
    p99 = np.maximum(np.maximum(np.clip(hi98, 0.0, None), p50 + max(q99, 0.0)), p90)
    return p50, p90, p99


def cross_validate(
    batch: list[DemandSeries], windows: int, names: tuple[str, ...], n_jobs: int = 1
) -> dict[str, np.ndarray]:
    """Arrays shaped (series, origins, H): actuals under "y", each candidate's P50 / hi-80 / hi-98."""
    # Imported on use: the web process imports this module and must not load pandas/scipy/pyarrow.
    from statsforecast import StatsForecast
    from statsforecast.models import SeasonalNaive

    sf = StatsForecast(
        models=[build(n) for n in names], freq="h", n_jobs=n_jobs, fallback_model=SeasonalNaive(season_length=DAY)
    )
    cv = sf.cross_validation(h=H, df=frame(batch), n_windows=windows, step_size=H, level=LEVELS)
    cv = cv.sort_values(["unique_id", "cutoff", "ds"])
    shape = (len(batch), windows, H)
    cols = ["y"] + [f"{n}{suffix}" for n in names for suffix in ("", "-hi-80", "-hi-98")]
    return {c: cv[c].to_numpy(dtype=float).reshape(shape) for c in cols}


def calibrate(arrays: dict[str, np.ndarray], j: int, name: str) -> Calibration:
    """Candidate `name` on series j: band floors and weekly miss from the selection origins, and
    the coverage those calibrated bands reach on the holdout."""
    y = arrays["y"][j]
    fitted = np.clip(arrays[name][j][:-1], 0.0, None)
    resid = (y[:-1] - fitted).ravel()
    q90, q99 = float(np.quantile(resid, 0.90)), float(np.quantile(resid, 0.99))
    p50, p90, p99 = bands(arrays[name][j][-1], arrays[f"{name}-hi-80"][j][-1], arrays[f"{name}-hi-98"][j][-1], q90, q99)
    hold = y[-1]
    return Calibration(
        coverage={k: round(float(np.mean(hold <= b)), 4) for k, b in (("p50", p50), ("p90", p90), ("p99", p99))},
        resid_q90=q90,
        resid_q99=q99,
        weekly_miss=float(np.abs(y[:-1].mean(axis=1) - fitted.mean(axis=1)).max()),
    )


def choose(arrays: dict[str, np.ndarray], j: int, names: tuple[str, ...]) -> Backtest:
    """Series j: select on origins [:-1]; score every candidate on origin [-1], which none saw."""
    y = arrays["y"][j]
    sel, hold = y[:-1].ravel(), y[-1]
    rows = []
    for n in names:
        p = np.clip(arrays[n][j], 0.0, None)
        rows.append({"method": n, "selection_error": wape(sel, p[:-1].ravel()), "holdout_error": wape(hold, p[-1])})
    scored = [(r["selection_error"], names.index(str(r["method"])), str(r["method"])) for r in rows]
    # Ties go to the earlier name in ORDER, so the simpler model wins a tie; no demand at all: naive.
    ranked = sorted(t for t in scored if t[0] is not None)
    method = ranked[0][2] if ranked else names[0]
    return Backtest(method, rows, {n: calibrate(arrays, j, n) for n in names})


def backtest_batch(
    batch: list[DemandSeries], *, n_jobs: int = 1, candidates: tuple[str, ...] = ORDER
) -> list[Backtest | None]:
    """One cross_validation call per (origins, candidate set) group; None where history is too short."""
    out: list[Backtest | None] = [None] * len(batch)
    groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for i, s in enumerate(batch):
        p = plan(len(s.values), candidates)
        if p is not None:
            groups.setdefault(p, []).append(i)
    for (windows, names), idx in groups.items():
        arrays = cross_validate([batch[i] for i in idx], windows, names, n_jobs)
        for j, i in enumerate(idx):
            out[i] = choose(arrays, j, names)
    return out
