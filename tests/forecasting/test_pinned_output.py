"""The job's numbers pinned on a fixed set of series, so a change made for speed (issue 47.5) shows if it
moved any forecast beyond floating-point noise.

Two pins: (1) `pipeline.forecast_batch` on nine in-memory series (a trend, an old and a young step, bursts,
a Sunday ending, histories of 2, 6, 20 and 36 weeks, realised feedback) — every candidate's errors, the
choice, the band widths and coverage, each band's weekly means and peaks, its first week hour by hour and
its sum, at 1e-9 relative; (2) the whole job through the database (read, chunks, write, pools, stress) on
three tenants, every figure written per series (rounded to 4 places by the writer) and each pool's bands
(weekly means and peaks, first week, sum) to 1e-9.

The pinned figures are in pinned_forecasts.json, written by the code before the speed work; to re-pin after
a change that is meant to move forecasts: PIN_FORECASTS_WRITE=1 pytest tests/forecasting/test_pinned_output.py
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from entitlements.services import entitlement_grant
from forecasting import pipeline, services
from forecasting.candidates import WEEK
from forecasting.history import DemandSeries
from forecasting.models import ForecastSeries, PoolDemand
from tests.factories import build_fleet, grant_kwargs
from tests.forecasting.helpers import END, cycles_cu, write_demand

PINNED = Path(__file__).with_name("pinned_forecasts.json")
WRITE = os.environ.get("PIN_FORECASTS_WRITE") == "1"
REL = 1e-9
START = datetime(2026, 1, 5, tzinfo=UTC)


def _series() -> tuple[list[DemandSeries], list[int], list[pipeline.Feedback]]:
    trend = cycles_cu(20 * WEEK, base=10, trend_per_week=0.35 / 8, seed=0)
    old_step = cycles_cu(20 * WEEK, base=10, seed=1)
    old_step[14 * WEEK :] *= 1.6
    young = cycles_cu(20 * WEEK, base=10, seed=5)
    young[int(18.4 * WEEK) :] *= 1.25
    bursty = cycles_cu(20 * WEEK, base=10, seed=3)
    bursty[np.random.default_rng(9).choice(20 * WEEK, 12, replace=False)] *= 4
    bursty[-30] = 55.0
    values = {
        "trend": trend,
        "old-step": old_step,
        "young-step": young,
        "bursty": bursty,
        "sunday": cycles_cu(20 * WEEK, base=10, weekend=0.4, seed=4),
        "two-weeks": cycles_cu(2 * WEEK, base=5, seed=6),
        "six-weeks": cycles_cu(6 * WEEK, base=30, seed=7),
        "long": cycles_cu(36 * WEEK, base=40, trend_per_week=0.03, seed=8),
        "long-fed-back": cycles_cu(36 * WEEK, base=41, seed=9),
    }
    batch = [DemandSeries(k, "m", "r", START, v) for k, v in values.items()]
    leads = [26, 12, 8, 26, 4, 12, 12, 26, 13]
    fbs = [pipeline.Feedback()] * 8 + [pipeline.Feedback({"theta": 0.4, "naive_weekly": 0.9}, widen=1.3)]
    return batch, leads, fbs


def _bands(v: np.ndarray) -> dict[str, Any]:
    weeks = v[: len(v) // WEEK * WEEK].reshape(-1, WEEK)
    return {
        "mean": weeks.mean(axis=1).tolist(),
        "peak": weeks.max(axis=1).tolist(),
        "head": v[:WEEK].tolist(),
        "sum": float(v.sum()),
        "len": len(v),
    }


def _pipeline_figures() -> dict[str, Any]:
    batch, leads, fbs = _series()
    out = pipeline.forecast_batch(batch, horizon_h=26 * WEEK, lead_weeks=leads, feedback=fbs)
    figures = {}
    for f in out:
        t = f.backtest
        figures[f.key[0]] = {
            "method": f.method,
            "note": f.note,
            "start": f.start.isoformat(),
            "p50": _bands(f.p50),
            "p90": _bands(f.p90),
            "p99": _bands(f.p99),
            "backtest": None
            if t is None
            else {
                "candidates": t.candidates,
                "coverage": t.coverage,
                "q90": t.q90.tolist(),
                "q99": t.q99.tolist(),
                "why": t.why,
                "trend": t.trend,
                "runner_up": t.runner_up,
                "chart": t.chart(),
            },
        }
    return figures


def _job_figures(capture: Any) -> dict[str, Any]:
    fleet = build_fleet()
    for pool, tenant in ((fleet.pool_a, fleet.acme), (fleet.pool_b, fleet.globex)):
        entitlement_grant(
            actor=fleet.operator,
            reason="test",
            **grant_kwargs(pool, tenant, "100", start=END - timedelta(days=30), days=60),
        )
    for i, (tenant, weeks, trend) in enumerate((("acme", 12, 0.03), ("globex", 36, 0.0), ("initech", 5, 0.0))):
        write_demand(
            tenant=tenant,
            model="llama-test",
            region="us-test",
            cu=cycles_cu(weeks * WEEK, base=30 + 10 * i, trend_per_week=trend, seed=20 + i),
            r=1000,
            throttled_share=0.2 if i == 0 else 0.0,
        )
    with capture(execute=True):  # the run starts once its row is committed
        run = services.forecast_run_request(parameters={"end": END.isoformat(), "batch_size": 2}, background=False)
    run.refresh_from_db()
    assert (run.status, run.series_count) == ("succeeded", 3), (run.status, run.error)
    fields = ("method", "history_hours", "history", "hourly", "weekly", "candidates", "holdout_error", "coverage")
    rows = ForecastSeries.objects.filter(run=run).order_by("tenant_slug")
    return {
        "series": {s.tenant_slug: {k: getattr(s, k) for k in (*fields, "note", "selection")} for s in rows},
        "pools": {
            p.pool.slug: {"hourly": {k: _bands(np.asarray(v)) for k, v in p.hourly.items()}, "tenants": p.tenants}
            for p in PoolDemand.objects.filter(run=run).select_related("pool")
        },
    }


def _same(got: Any, want: Any, where: str = "") -> None:
    """Equal, numbers to REL (relative; 1e-12 absolute near zero)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, sorted(got), sorted(want))
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, int | float), (where, got)
        assert abs(got - want) <= max(REL * abs(want), 1e-12), (where, got, want)
    else:
        assert got == want, (where, got, want)


def _check(name: str, figures: dict[str, Any]) -> None:
    # Through JSON, so tuples, numpy scalars and int keys compare as they were stored.
    figures = json.loads(json.dumps(figures))
    pinned = json.loads(PINNED.read_text()) if PINNED.exists() else {}
    if WRITE:
        pinned[name] = figures
        PINNED.write_text(json.dumps(pinned, indent=None, sort_keys=True) + "\n")
    assert name in pinned, f"no pinned figures for {name}: run once with PIN_FORECASTS_WRITE=1"
    _same(figures, pinned[name], name)


def test_the_pipelines_forecasts_are_pinned():
    _check("pipeline", _pipeline_figures())


@pytest.mark.django_db
def test_the_jobs_written_forecasts_are_pinned(django_capture_on_commit_callbacks):
    _check("job", _job_figures(django_capture_on_commit_callbacks))
