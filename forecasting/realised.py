"""Accuracy fed back (issue 32; docs/forecasting.md): earlier runs' forecasts of a series against what
then happened, as input to this run.

For each lag L in LAGS, the newest succeeded run whose forecast of the series started L weeks (± 3
days) before this run's end: its expected weekly means against the realised ones for the weeks now
past (MASE, scaled like the backtest), and whether each realised weekly peak stayed at or under the
upside (P90) weekly peak it forecast. Two uses: the realised MASE of the method that run chose counts
half in this run's ranking of that method, and the pooled P90 peak coverage moves this run's bands
(wider when fewer than 90 % of realised weeks stayed under, narrower when more did), shrunk toward no
change while few weeks are known.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np

from forecasting.candidates import WEEK
from forecasting.history import DemandSeries
from forecasting.models import ForecastRun, ForecastSeries
from forecasting.pipeline import Feedback
from forecasting.selection import mase_scale

LAGS = (1, 4, 13)
TOLERANCE = timedelta(days=3)
TARGET = 0.90
SHRINK_WEEKS = 4  # weeks of evidence at which the correction is half its full size
LIMITS = (0.5, 2.0)

Key = tuple[str, str, str]


def _past(keys: list[Key], end: datetime, lag: int) -> dict[Key, ForecastSeries]:
    at = end - timedelta(weeks=lag)
    rows = (
        ForecastSeries.objects.filter(
            run__status=ForecastRun.Status.SUCCEEDED,
            start__gte=at - TOLERANCE,
            start__lte=at + TOLERANCE,
            tenant_slug__in={k[0] for k in keys},
        )
        .only("tenant_slug", "model", "region", "start", "method", "weekly")
        .order_by("-start")
    )
    wanted, out = set(keys), {}
    for r in rows:
        key = (r.tenant_slug, r.model, r.region)
        if key in wanted and key not in out:
            out[key] = r
    return out


def _compare(s: DemandSeries, old: ForecastSeries, end: datetime) -> dict[str, Any] | None:
    offset = int((old.start - s.start) / timedelta(hours=1))
    weeks = min(int((end - old.start) / timedelta(weeks=1)), len(old.weekly.get("expected_mean", [])))
    if offset < 0 or weeks < 1:
        return None
    real = s.values[offset : offset + weeks * WEEK].reshape(weeks, WEEK)
    fc = np.asarray(old.weekly["expected_mean"][:weeks])
    peaks = np.asarray(old.weekly.get("upside_peak", [np.inf] * weeks)[:weeks])
    return {
        "made_at": old.start.isoformat(),
        "method": old.method,
        "weeks": weeks,
        "forecast_mean": round(float(fc.mean()), 4),
        "realised_mean": round(float(real.mean()), 4),
        "mase": round(float(np.mean(np.abs(fc - real.mean(axis=1))) / mase_scale(s.values)), 4),
        "peaks_under_p90": int(np.sum(real.max(axis=1) <= peaks)),
    }


def widen_factor(under: int, weeks: int) -> float:
    if not weeks:
        return 1.0
    shrink = weeks / (weeks + SHRINK_WEEKS)
    return float(np.clip(1.0 + shrink * 2.0 * (TARGET - under / weeks), *LIMITS))


def feedback(batch: list[DemandSeries], end: datetime) -> tuple[list[Feedback], list[dict[str, Any]]]:
    """Per series: the Feedback the pipeline takes, and what to show (stored as ForecastSeries.realised)."""
    keys = [s.key for s in batch]
    past = {lag: _past(keys, end, lag) for lag in LAGS}
    fbs, shown = [], []
    for s in batch:
        lags = {str(lag): c for lag in LAGS if s.key in past[lag] and (c := _compare(s, past[lag][s.key], end))}
        by_method: dict[str, list[float]] = {}
        for c in lags.values():
            by_method.setdefault(c["method"], []).append(c["mase"])
        weeks = sum(c["weeks"] for c in lags.values())
        under = sum(c["peaks_under_p90"] for c in lags.values())
        widen = widen_factor(under, weeks)
        fbs.append(Feedback({m: float(np.mean(v)) for m, v in by_method.items()}, widen))
        shown.append(
            {"lags": lags, "p90_peak_coverage": round(under / weeks, 4) if weeks else None, "widen": round(widen, 4)}
            if lags
            else {}
        )
    return fbs, shown
