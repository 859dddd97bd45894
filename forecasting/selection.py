"""Honest model selection: rolling one-week backtest origins, chosen on the earlier, scored on the last.

Every candidate is refitted at every origin (statsforecast's cross_validation). The winner is the
lowest error over the selection origins; the last origin is the holdout, which no candidate saw
when the choice was made, so the reported holdout error is what the chosen model does on new data.
Bands are calibrated on the selection origins too (a model's own interval can be too narrow) and
their coverage is measured on the holdout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

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


# --- Selection at the lead time (issue 32; docs/forecasting.md) ----------------------------------------
# Backtest origins are whole weeks back from the end; every candidate forecasts from each origin as far
# as the longest horizon the history can score (1, 4, 13 or 26 weeks, three weeks of training at the
# first origin and at least two origins: the earlier ones to choose on, the last to score on). The
# error is MASE of the weekly level in the horizon's week (scaled by the history's mean week-to-week
# change), weighted toward the lead time of the accelerator the series is served on.

HORIZONS = (1, 4, 13, 26)
MIN_TRAIN_WEEKS = 3
MAX_ORIGINS = 6  # bounded work per series, whatever the history
LEAD_METRIC = "mase"
FLAT = ("naive_daily", "naive_weekly", "level_shift")


@dataclass(frozen=True)
class LeadPlan:
    horizons: tuple[int, ...]  # the ones the history can score
    origins: tuple[int, ...]  # hours of history at each origin, oldest first; the last is the holdout

    @property
    def weeks(self) -> int:
        return max(self.horizons)


def lead_plan(n_hours: int) -> LeadPlan | None:
    k = n_hours // WEEK
    scorable = tuple(h for h in HORIZONS if k - MIN_TRAIN_WEEKS - h + 1 >= 2)
    if not scorable:
        return None
    n = min(MAX_ORIGINS, k - MIN_TRAIN_WEEKS - scorable[-1] + 1)
    return LeadPlan(scorable, tuple(n_hours - (scorable[-1] + i) * WEEK for i in reversed(range(n))))


def horizon_weights(horizons: tuple[int, ...], lead_weeks: int) -> dict[int, float]:
    """w_h ∝ 1 / (1 + |ln(h / lead)|)²: the lead time's own horizon counts most, a factor of two either
    side about a third as much."""
    raw = {h: 1.0 / (1.0 + abs(np.log(h / max(lead_weeks, 1)))) ** 2 for h in horizons}
    total = sum(raw.values())
    return {h: round(w / total, 4) for h, w in raw.items()}


def daily(values: np.ndarray) -> np.ndarray:
    return whole_days(values).mean(axis=1)


def whole_days(values: np.ndarray) -> np.ndarray:
    k = len(values) // DAY
    return values[len(values) - k * DAY :].reshape(k, DAY)


def daily_frame(batch: list[np.ndarray]) -> pd.DataFrame:
    import pandas as pd

    parts = []
    for i, v in enumerate(batch):
        d = daily(v)
        parts.append(pd.DataFrame({"unique_id": i, "ds": np.arange(len(d)), "y": d}))
    return pd.concat(parts, ignore_index=True)


def fitted_daily(batch: list[np.ndarray], names: tuple[str, ...], days: int, windows: int = 0) -> dict[str, np.ndarray]:
    """statsforecast on the daily means: a forecast of `days` (windows=0) or a cross-validation over
    `windows` weekly origins ending at each series' end; arrays (series, [windows,] days) per name."""
    from statsforecast import StatsForecast
    from statsforecast.models import SeasonalNaive

    from forecasting.candidates import build_daily

    if not names:
        return {}
    sf = StatsForecast(models=[build_daily(n) for n in names], freq=1, fallback_model=SeasonalNaive(season_length=7))
    df = daily_frame(batch)
    if windows:
        out = sf.cross_validation(h=days, df=df, n_windows=windows, step_size=7).sort_values(
            ["unique_id", "cutoff", "ds"]
        )
        shape: tuple[int, ...] = (len(batch), windows, days)
    else:
        out = sf.forecast(df=df, h=days).sort_values(["unique_id", "ds"])
        shape = (len(batch), days)
    return {n: out[n].to_numpy(dtype=float).reshape(shape) for n in names}


def path(name: str, values: np.ndarray, n_hours: int, fitted: np.ndarray | None) -> np.ndarray:
    from forecasting.candidates import FITTED, custom_path, hourly_from_daily, profile

    if name in FITTED:
        assert fitted is not None  # noqa: S101  # fitted names always come with their daily forecast
        return hourly_from_daily(fitted, profile(values), n_hours)
    return np.clip(custom_path(name, values, n_hours), 0.0, None)


def mase_scale(values: np.ndarray) -> float:
    from forecasting.candidates import whole

    means = whole(values, WEEK).mean(axis=1)
    scale = float(np.mean(np.abs(np.diff(means)))) if len(means) > 1 else 0.0
    return scale if scale > 0 else max(float(np.mean(values)) * 0.01, 1e-9)


@dataclass
class LeadBacktest:
    """One series' selection at the lead time: what was scored, what won, why, and its bands."""

    method: str
    plan: LeadPlan | None
    lead_weeks: int
    weights: dict[int, float]
    candidates: list[dict[str, Any]]  # method, selection_error, holdout_error, errors {h: MASE}, refused
    paths: dict[str, np.ndarray] = field(default_factory=dict)  # per candidate, at each origin (origins, hours)
    actual: np.ndarray | None = None  # (origins, hours)
    q90: np.ndarray = field(default_factory=lambda: np.zeros(1))  # relative band width per forecast week
    q99: np.ndarray = field(default_factory=lambda: np.zeros(1))
    coverage: dict[str, float] = field(default_factory=dict)
    runner_up: str | None = None
    why: str = ""
    trend: dict[str, Any] = field(default_factory=dict)

    def row(self, name: str) -> dict[str, Any]:
        return next(r for r in self.candidates if r["method"] == name)

    @property
    def holdout_error(self) -> float | None:
        return self.row(self.method)["holdout_error"] if self.plan else None

    @property
    def chosen(self) -> Backtest:  # the shape chunks and older readers expect: .coverage
        return self  # type: ignore[return-value]

    def chart(self) -> dict[str, Any]:
        """Forecast made at the holdout origin vs what happened, week by week."""
        if self.plan is None or self.actual is None:
            return {}
        made = self.plan.weeks
        fc = self.paths[self.method][-1].reshape(made, WEEK).mean(axis=1)
        act = self.actual[-1].reshape(made, WEEK).mean(axis=1)
        return {
            "made_weeks_ago": made,
            "forecast": [round(float(v), 4) for v in fc],
            "actual": [round(float(v), 4) for v in act],
        }


def backtest_lead(values_batch: list[np.ndarray], lead_weeks: list[int]) -> list[LeadBacktest | None]:
    """Every candidate at every origin, errors at the scorable horizons; None where history is too short."""
    from forecasting.candidates import FITTED, LEAD_ORDER

    out: list[LeadBacktest | None] = [None] * len(values_batch)
    groups: dict[LeadPlan, list[int]] = {}
    for i, v in enumerate(values_batch):
        p = lead_plan(len(v))
        if p is not None:
            groups.setdefault(p, []).append(i)
    for p, idx in groups.items():
        hours = p.weeks * WEEK
        cv = fitted_daily([values_batch[i] for i in idx], FITTED, p.weeks * 7, windows=len(p.origins))
        for j, i in enumerate(idx):
            v = values_batch[i]
            actual = np.stack([v[o : o + hours] for o in p.origins])
            paths = {
                n: np.stack(
                    [path(n, v[:o], hours, cv[n][j][w] if n in FITTED else None) for w, o in enumerate(p.origins)]
                )
                for n in LEAD_ORDER
            }
            out[i] = score(p, v, actual, paths, lead_weeks[i])
    return out


def score(p: LeadPlan, values: np.ndarray, actual: np.ndarray, paths: dict[str, np.ndarray], lead: int) -> LeadBacktest:
    scale = mase_scale(values)
    weights = horizon_weights(p.horizons, lead)
    act_w = actual.reshape(len(p.origins), p.weeks, WEEK).mean(axis=2)
    rows = []
    for n, arr in paths.items():
        fc_w = arr.reshape(len(p.origins), p.weeks, WEEK).mean(axis=2)
        # MASE over a horizon h: the mean absolute error of weeks 1..h (scaled), per origin.
        err = np.cumsum(np.abs(fc_w - act_w), axis=1) / np.arange(1, p.weeks + 1) / scale  # (origins, weeks)
        per_h = {h: float(err[:-1, h - 1].mean()) for h in p.horizons}
        rows.append(
            {
                "method": n,
                "errors": {str(h): round(e, 4) for h, e in per_h.items()},
                "holdout_errors": {str(h): round(float(err[-1, h - 1]), 4) for h in p.horizons},
                "selection_error": round(sum(weights[h] * per_h[h] for h in p.horizons), 4),
                "holdout_error": round(sum(weights[h] * float(err[-1, h - 1]) for h in p.horizons), 4),
                "refused": "",
            }
        )
    return LeadBacktest(
        method="", plan=p, lead_weeks=lead, weights=weights, candidates=rows, paths=paths, actual=actual
    )


def calibrate_lead(t: LeadBacktest, widen: float = 1.0) -> None:
    """Band widths from the backtest residuals of the chosen method, per forecast week, in units of that
    week's forecast level (a share of the hour's own P50 would make near-zero night hours explode the
    widths of a noisy naive path). Coverage is measured
    leaving one origin out: each origin's hours against the widths the other origins give, so no width
    is scored on the residuals it came from. `widen` is the realised-accuracy factor of earlier runs."""
    if t.plan is None or t.actual is None:
        return
    n_o, weeks = len(t.plan.origins), t.plan.weeks
    p50 = t.paths[t.method].reshape(n_o, weeks, WEEK)
    act = t.actual.reshape(n_o, weeks, WEEK)
    denom = p50.mean(axis=2, keepdims=True) + 1e-9  # the week's level: noise does not scale with a night hour
    rel = (act - p50) / denom

    def widths(rows: np.ndarray, q: float) -> np.ndarray:
        return np.array([np.quantile(rows[:, k], q) for k in range(weeks)]).clip(0.0) * widen

    t.q90, t.q99 = widths(rel, 0.90), np.maximum(widths(rel, 0.99), widths(rel, 0.90))
    hits: dict[str, list[float]] = {"p50": [], "p90": [], "p99": []}
    for o in range(n_o):
        rest = np.delete(rel, o, axis=0)
        q90, q99 = widths(rest, 0.90), widths(rest, 0.99)
        hits["p50"].append(float(np.mean(act[o] <= p50[o])))
        hits["p90"].append(float(np.mean(act[o] <= p50[o] + q90[:, None] * denom[o])))
        hits["p99"].append(float(np.mean(act[o] <= p50[o] + np.maximum(q99, q90)[:, None] * denom[o])))
    t.coverage = {k: round(float(np.mean(v)), 4) for k, v in hits.items()}


def lead_bands(t: LeadBacktest | None, p50: np.ndarray, widen: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """P90 and P99 of a forecast path: P50 + the calibrated widths × the week's level, growing as √weeks
    past the longest scored horizon; without a backtest, 20 % and 50 % of the level, times `widen`."""
    n_weeks = -(-len(p50) // WEEK)
    k = np.arange(1, n_weeks + 1)
    if t is None or t.plan is None:
        q90, q99 = np.full(n_weeks, 0.2 * widen), np.full(n_weeks, 0.5 * widen)
    else:
        last = len(t.q90)
        grow = np.sqrt(np.maximum(k, last) / last)
        q90 = np.concatenate([t.q90, np.full(max(n_weeks - last, 0), t.q90[-1])])[:n_weeks] * np.where(
            k > last, grow, 1.0
        )
        q99 = np.concatenate([t.q99, np.full(max(n_weeks - last, 0), t.q99[-1])])[:n_weeks] * np.where(
            k > last, grow, 1.0
        )
    level = np.repeat([float(np.mean(p50[w * WEEK : (w + 1) * WEEK])) for w in range(n_weeks)], WEEK)[: len(p50)]
    p90 = p50 + np.repeat(q90, WEEK)[: len(p50)] * level
    p99 = np.maximum(p50 + np.repeat(q99, WEEK)[: len(p50)] * level, p90)
    return p90, p99
