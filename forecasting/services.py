"""Writes: request a run, claim it, execute it, write its results once.

A run is claimed with a compare-and-swap `update()`. The claimant checkpoints after every batch
(progress + heartbeat); a redelivered task may take over a run only when that heartbeat is stale,
i.e. its worker died. Results are written at the end, in one transaction that first checks the
claim is still ours, so a run is never written twice even if two workers ran it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from entitlements.models import Tenant
from forecasting import demand, history, placement, selection
from forecasting.models import ForecastRun, ForecastSeries, PoolDemand

RUNNING = ForecastRun.Status.RUNNING
HORIZON_WEEKS = 26
CHART_HOURS = 2 * demand.WEEK


class ClaimLost(Exception):
    """Another worker re-claimed the run (ours was presumed dead): stop without writing."""


class BadParameters(ValueError):
    pass


@dataclass(frozen=True)
class Parameters:
    lookback_days: int = 56
    batch_size: int = 100
    n_jobs: int = 1
    spike_pct: float = 20.0
    spike_hours: int = 3
    end: str | None = None
    # Sleep between batches: lets a background run yield the CPU on a small host (and lets a test
    # catch a run mid-way); it never changes results.
    pause_between_batches_s: float = 0.0

    LIMITS = {
        "lookback_days": (3, 365),
        "batch_size": (1, 1000),
        "n_jobs": (1, 2),
        "spike_pct": (0, 500),
        "spike_hours": (0, 24),
        "pause_between_batches_s": (0, 60),
    }

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Parameters:
        raw = dict(raw or {})
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise BadParameters(f"unknown parameter {sorted(unknown)[0]}")
        values: dict[str, Any] = {}
        for name, (lo, hi) in cls.LIMITS.items():
            if name in raw:
                kind = type(getattr(cls, name))
                try:
                    v = kind(raw[name])
                except (TypeError, ValueError):
                    raise BadParameters(f"{name} must be a number")
                if not lo <= v <= hi:
                    raise BadParameters(f"{name} must be within {lo}–{hi}")
                values[name] = v
        if raw.get("end") is not None:
            end = parse_datetime(str(raw["end"]))
            if end is None or end.tzinfo is None:
                raise BadParameters("end must be an ISO datetime with a timezone")
            values["end"] = end.isoformat()
        return cls(**values)

    def end_at(self) -> datetime:
        return history.floor_hour(parse_datetime(self.end) if self.end else timezone.now())


def stale_after() -> timedelta:
    return timedelta(seconds=settings.FORECAST_RUN_STALE_AFTER_S)


def forecast_run_request(
    *, requested_by: Any = None, parameters: dict[str, Any] | None = None, trigger: str = "manual"
) -> ForecastRun:
    """Create a queued run and hand it to a worker once the row is committed."""
    params = Parameters.parse(parameters)
    with transaction.atomic():
        run = ForecastRun.objects.create(
            parameters={k: getattr(params, k) for k in Parameters.__dataclass_fields__},
            requested_by=requested_by if getattr(requested_by, "pk", None) else None,
            trigger=trigger,
        )
        from forecasting.tasks import run_forecast

        run_id = str(run.pk)
        transaction.on_commit(lambda: run_forecast.delay(run_id))
    return run


def forecast_run_claim(*, run_id: Any, worker: str) -> str:
    """'claimed', 'busy' (a live worker has it) or 'done'. Two paths to a claim, both a CAS."""
    now = timezone.now()
    take = {"status": RUNNING, "claimed_by": worker, "heartbeat_at": now, "started_at": now, "progress": 0}
    runs = ForecastRun.objects.filter(pk=run_id)
    if runs.filter(status=ForecastRun.Status.QUEUED).update(attempts=F("attempts") + 1, **take):
        return "claimed"
    stale = Q(heartbeat_at__lt=now - stale_after()) | Q(heartbeat_at__isnull=True)
    if runs.filter(stale, status=RUNNING).update(attempts=F("attempts") + 1, **take):
        return "claimed"
    status = runs.values_list("status", flat=True).first()
    return "busy" if status == RUNNING else "done"


def forecast_run_release(*, run_id: Any, worker: str) -> bool:
    """Give a claimed run back to the queue (before a retry for a transient error)."""
    return bool(
        ForecastRun.objects.filter(pk=run_id, status=RUNNING, claimed_by=worker).update(
            status=ForecastRun.Status.QUEUED, claimed_by="", heartbeat_at=None
        )
    )


def forecast_run_fail(*, run_id: Any, worker: str, error: str) -> None:
    ForecastRun.objects.filter(pk=run_id, status=RUNNING, claimed_by=worker).update(
        status=ForecastRun.Status.FAILED, error=error[:4000], finished_at=timezone.now()
    )


def _checkpoint(run_id: Any, worker: str, progress: int) -> None:
    if not ForecastRun.objects.filter(pk=run_id, status=RUNNING, claimed_by=worker).update(
        progress=min(progress, 99), heartbeat_at=timezone.now()
    ):
        raise ClaimLost(str(run_id))


def _round(values: Any) -> list[float]:
    return [round(float(v), 4) for v in values]


def _weekly(values: Any, *, agg: str) -> list[float]:
    weeks = values[: HORIZON_WEEKS * demand.WEEK].reshape(HORIZON_WEEKS, demand.WEEK)
    return _round(weeks.max(axis=1) if agg == "max" else weeks.mean(axis=1))


def _backtest_fields(f: demand.SeriesForecast) -> dict[str, Any]:
    t = f.backtest
    chosen = t.chosen if t is not None else None
    return {
        "error_metric": selection.ERROR_METRIC,
        "candidates": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
            for row in (t.candidates if t else [])
        ],
        "holdout_error": round(t.holdout_error, 4) if t is not None and t.holdout_error is not None else None,
        "coverage": chosen.coverage if chosen is not None else {},
    }


def _results(forecasts: list[demand.SeriesForecast], params: Parameters, run: ForecastRun) -> tuple[list, list]:
    hours = demand.spike_hours(forecasts, params.spike_hours)
    tenants = {t.slug: t for t in Tenant.objects.all()}
    placed = placement.pools_by_series(params.end_at())
    series_rows, pool_acc = [], {}
    for f in forecasts:
        tenant, model, region = f.key
        pools = placed.get(f.key, [])
        note = "; ".join(n for n in (f.note, "" if pools else placement.UNPLACED) if n)
        scen = {"expected": f.p50, "upside": f.p90, "stress": demand.stress(f, spike_pct=params.spike_pct, hours=hours)}
        series_rows.append(
            ForecastSeries(
                run=run,
                tenant_slug=tenant,
                tenant=tenants.get(tenant),
                model=model,
                region=region,
                method=f.method,
                history_hours=f.history_hours,
                start=f.start,
                history=_round(f.history_tail),
                hourly={k: _round(v[:CHART_HOURS]) for k, v in scen.items()} | {"p99": _round(f.p99[:CHART_HOURS])},
                weekly={f"{k}_peak": _weekly(v, agg="max") for k, v in scen.items()}
                | {"expected_mean": _weekly(f.p50, agg="mean")},
                **_backtest_fields(f),
                note=note[:200],
            )
        )
        for pool_id, share in pools:
            acc = pool_acc.setdefault(pool_id, {"pool_id": pool_id, "start": f.start, "scen": {}, "tenants": {}})
            for k, v in scen.items():
                acc["scen"][k] = acc["scen"].get(k, 0) + v * share
            acc["tenants"][tenant] = acc["tenants"].get(tenant, 0.0) + float(f.p50.mean()) * share
    pool_rows = []
    for acc in pool_acc.values():
        total = sum(acc["tenants"].values()) or 1.0
        pool_rows.append(
            PoolDemand(
                run=run,
                pool_id=acc["pool_id"],
                start=acc["start"],
                hourly={k: _round(v) for k, v in acc["scen"].items()},
                tenants={t: round(v / total, 4) for t, v in sorted(acc["tenants"].items())},
            )
        )
    return series_rows, pool_rows


def _write_results(run_id: Any, worker: str, series_rows: list, pool_rows: list) -> None:
    with transaction.atomic():
        run = ForecastRun.objects.select_for_update().get(pk=run_id)
        if run.status != RUNNING or run.claimed_by != worker:
            raise ClaimLost(str(run_id))
        # Replace, never append: whatever a dead attempt might have left is gone with this write.
        ForecastSeries.objects.filter(run=run).delete()
        PoolDemand.objects.filter(run=run).delete()
        ForecastSeries.objects.bulk_create(series_rows, batch_size=500)
        PoolDemand.objects.bulk_create(pool_rows, batch_size=50)
        ForecastRun.objects.filter(pk=run_id).update(
            status=ForecastRun.Status.SUCCEEDED,
            progress=100,
            finished_at=timezone.now(),
            results_written=F("results_written") + 1,
            series_count=len(series_rows),
            error="",
        )


def forecast_run_execute(*, run_id: Any, worker: str) -> None:
    """Compute the whole run in memory, checkpointing per batch, then write the results once."""
    run = ForecastRun.objects.get(pk=run_id)
    params = Parameters.parse(run.parameters)
    end = params.end_at()
    series = [
        s
        for s in history.demand_series(start=end - timedelta(days=params.lookback_days), end=end)
        if len(s.values) >= demand.MIN_HISTORY
    ]
    batches = [series[i : i + params.batch_size] for i in range(0, len(series), params.batch_size)]
    forecasts: list[demand.SeriesForecast] = []
    for i, batch in enumerate(batches):
        forecasts += demand.forecast_batch(batch, horizon_h=HORIZON_WEEKS * demand.WEEK, n_jobs=params.n_jobs)
        _checkpoint(run_id, worker, int(100 * (i + 1) / (len(batches) + 1)))
        if params.pause_between_batches_s:
            time.sleep(params.pause_between_batches_s)
    series_rows, pool_rows = _results(forecasts, params, run)
    _write_results(run_id, worker, series_rows, pool_rows)
