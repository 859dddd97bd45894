"""Selection at the lead time (issue 32, issue 47; docs/forecasting.md): every candidate backtested from
whole-week origins, scored on weekly levels, chosen on the earlier origins and scored on the last (the
holdout, which no choice saw).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from forecasting.candidates import DAY, WEEK

if TYPE_CHECKING:
    import pandas as pd

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


def path(
    name: str, values: np.ndarray, n_hours: int, fitted: np.ndarray | None, shape: np.ndarray | None = None
) -> np.ndarray:
    """One candidate's hourly path; `shape` is profile(values) when the caller has it already (the fitted
    candidates and level_shift share it: computed once per series and origin, not once per candidate)."""
    from forecasting.candidates import FITTED, custom_path, hourly_from_daily, profile

    if name in FITTED:
        assert fitted is not None  # noqa: S101  # fitted names always come with their daily forecast
        return hourly_from_daily(fitted, profile(values) if shape is None else shape, n_hours)
    return np.clip(custom_path(name, values, n_hours, shape), 0.0, None)


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
    def chosen(self) -> LeadBacktest:  # what chunks reads: .coverage
        return self

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
    from forecasting.candidates import FITTED, LEAD_ORDER, profile

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
            shapes = [profile(v[:o]) for o in p.origins]
            paths = {
                n: np.stack(
                    [
                        path(n, v[:o], hours, cv[n][j][w] if n in FITTED else None, shapes[w])
                        for w, o in enumerate(p.origins)
                    ]
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

    # Per forecast week, the 90th and 99th percentiles over every origin's hours of that week, in one
    # quantile call: first over all origins, then for each origin left out over the others (stacked).
    full = np.quantile(rel.transpose(1, 0, 2).reshape(weeks, -1), [0.90, 0.99], axis=1).clip(0.0) * widen
    t.q90, t.q99 = full[0], np.maximum(full[1], full[0])
    rest = rel[[[r for r in range(n_o) if r != o] for o in range(n_o)]]  # (left out, the others, weeks, hours)
    loo = np.quantile(rest.transpose(0, 2, 1, 3).reshape(n_o, weeks, -1), [0.90, 0.99], axis=2).clip(0.0) * widen
    q90, q99 = loo[0][:, :, None], np.maximum(loo[1], loo[0])[:, :, None]
    hits = {
        "p50": np.mean(act <= p50, axis=(1, 2)),
        "p90": np.mean(act <= p50 + q90 * denom, axis=(1, 2)),
        "p99": np.mean(act <= p50 + q99 * denom, axis=(1, 2)),
    }
    t.coverage = {k: round(float(np.mean(v)), 4) for k, v in hits.items()}


def lead_bands(
    t: LeadBacktest | None, p50: np.ndarray, widen: float = 1.0, extra: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """P90 and P99 of a forecast path: P50 + the calibrated widths × the week's level, growing as √weeks
    past the longest scored horizon; without a backtest, 20 % and 50 % of the level, times `widen`.
    `extra` (a share of the level) is added to both while a detected level shift is young."""
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
    q90, q99 = q90 + extra, q99 + extra
    level = np.repeat([float(np.mean(p50[w * WEEK : (w + 1) * WEEK])) for w in range(n_weeks)], WEEK)[: len(p50)]
    p90 = p50 + np.repeat(q90, WEEK)[: len(p50)] * level
    p99 = np.maximum(p50 + np.repeat(q99, WEEK)[: len(p50)] * level, p90)
    return p90, p99
