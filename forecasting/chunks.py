"""A run fanned out in chunks of series (issue 21.2): plan, claim, execute, write once, finish once.

Plan (the run's own task, under the run's claim): the series keys are listed without reading their
values, cut into chunks of FORECAST_CHUNK_SIZE with their pool placement fixed, and the run's pool
demand rows created empty, in one transaction; the chunk tasks go out as a Celery group after it
commits (inline under the embedded default).

Each chunk is claimed by compare-and-swap like a run, forecasts its series and, in one transaction,
(1) marks itself done with a conditional UPDATE on its claim token (a worker that lost the claim
writes nothing), (2) inserts its series, (3) adds its share to the run's pool demand rows (locked
in pool order, so concurrent chunks never deadlock) and (4) counts itself on the run. The stress
scenario needs the run's spike hours, which depend on every series: each chunk leaves what that
needs (its demand by hour of day, each series' P99 basis) and the transaction that lands the last
chunk finishes the run — a conditional UPDATE (chunks_done = chunks_total and still running), so
exactly one chunk does it — applying the spike to every series and pool and succeeding the run.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Least
from django.utils import timezone

from entitlements.models import Pool, Tenant
from forecasting import demand, history, pipeline, placement, realised, selection
from forecasting.models import CommittedAdjustment, ForecastChunk, ForecastRun, ForecastSeries, PoolDemand
from runs import claims

RUNNING = ForecastRun.Status.RUNNING
HORIZON_WEEKS = 26
HORIZON_H = HORIZON_WEEKS * demand.WEEK
CHART_HOURS = 2 * demand.WEEK
State = ForecastChunk.State


# Another worker re-claimed the work (ours was presumed dead), or the run ended: stop without writing.
ClaimLost = claims.ClaimLost


def stale_after() -> timedelta:
    """A chunk goes stale like its run does (FORECAST_RUN_STALE_AFTER_S)."""
    return claims.stale_after(ForecastRun)


def _round(values: Any) -> list[float]:
    return [round(float(v), 4) for v in values]


def _weekly(values: Any, *, agg: str) -> list[float]:
    weeks = values[:HORIZON_H].reshape(HORIZON_WEEKS, demand.WEEK)
    return _round(weeks.max(axis=1) if agg == "max" else weeks.mean(axis=1))


# --- plan -------------------------------------------------------------------------------------------


def plan(*, run_id: Any, worker: str, chunk_size: int) -> list[int]:
    """Split the claimed run into chunks (once: a redelivered plan finds them) and return the ids of
    the chunks not done yet, to dispatch after commit."""
    from forecasting.services import Parameters

    run = ForecastRun.objects.get(pk=run_id)
    params = Parameters.parse(run.parameters)
    end = params.end_at()
    with transaction.atomic():
        # The run's row lock: a planner that re-claimed a stale run waits here, then finds the chunks.
        claimed = claims.held(ForecastRun, pk=run_id, worker=worker).select_for_update().first()
        if claimed is None:
            raise ClaimLost(str(run_id))
        if claimed.chunks_total:
            pending = ForecastChunk.objects.filter(run_id=run_id).exclude(state=State.DONE)
            return list(pending.values_list("pk", flat=True))
        keys = history.series_keys(
            start=end - timedelta(days=params.lookback_days), end=end, min_hours=demand.MIN_HISTORY
        )
        placed = placement.pools_by_series(end)
        rows: list[list[Any]] = [[*k, [[pool, share] for pool, share in placed.get(k, [])]] for k in keys]
        chunks = ForecastChunk.objects.bulk_create(
            [
                ForecastChunk(run_id=run_id, index=i // chunk_size, keys=rows[i : i + chunk_size])
                for i in range(0, len(rows), chunk_size)
            ]
        )
        pools = sorted({pool for row in rows for pool, _ in row[3]})
        PoolDemand.objects.bulk_create(
            [PoolDemand(run_id=run_id, pool_id=p, start=end, hourly={}, tenants={}) for p in pools]
        )
        ForecastRun.objects.filter(pk=run_id).update(chunks_total=len(chunks), heartbeat_at=timezone.now())
        if not chunks:
            _finish(run_id, params)
        return [c.pk for c in chunks]


# --- claim ------------------------------------------------------------------------------------------


def claim(*, chunk_id: Any, token: str) -> str:
    """'claimed', 'busy' (a live worker has it) or 'done' (written, failed, or its run is over)."""
    now = timezone.now()
    take = {"state": State.RUNNING, "claim_token": token, "heartbeat_at": now, "attempts": F("attempts") + 1}
    open_run = ForecastChunk.objects.filter(pk=chunk_id, run__status=RUNNING)
    if open_run.filter(state=State.QUEUED).update(**take):
        return "claimed"
    stale = Q(heartbeat_at__lt=now - stale_after()) | Q(heartbeat_at__isnull=True)
    if open_run.filter(stale, state=State.RUNNING).update(**take):
        return "claimed"
    return "busy" if open_run.filter(state=State.RUNNING).exists() else "done"


def release(*, chunk_id: Any, token: str) -> bool:
    """Give a claimed chunk back (before a retry for a transient error)."""
    return bool(
        ForecastChunk.objects.filter(pk=chunk_id, state=State.RUNNING, claim_token=token).update(
            state=State.QUEUED, claim_token="", heartbeat_at=None
        )
    )


def fail(*, chunk_id: Any, token: str, error: str) -> None:
    """A chunk that cannot succeed fails its run (the other chunks then find the run over and stop)."""
    with transaction.atomic():
        if ForecastChunk.objects.filter(pk=chunk_id, state=State.RUNNING, claim_token=token).update(state=State.FAILED):
            run_id = ForecastChunk.objects.values_list("run_id", flat=True).get(pk=chunk_id)
            ForecastRun.objects.filter(pk=run_id, status=RUNNING).update(
                status=ForecastRun.Status.FAILED, error=error[:4000], finished_at=timezone.now()
            )


def checkpoint(chunk_id: Any, token: str) -> None:
    if not ForecastChunk.objects.filter(
        pk=chunk_id, state=State.RUNNING, claim_token=token, run__status=RUNNING
    ).update(heartbeat_at=timezone.now()):
        raise ClaimLost(str(chunk_id))


# --- execute ----------------------------------------------------------------------------------------


def _stress_basis(f: demand.SeriesForecast) -> dict[str, Any]:
    """What the stress scenario needs once the spike hours are known: each week's P99 maximum per hour
    of day (a week is whole days, so column j is hour (start.hour + j) % 24) and the charted hours."""
    weeks = f.p99[:HORIZON_H].reshape(HORIZON_WEEKS, 7, demand.DAY).max(axis=1)
    return {"week_max": weeks.tolist(), "head": f.p99[:CHART_HOURS].tolist()}


def _selection(t: selection.LeadBacktest | None) -> dict[str, Any]:
    """What the planning page explains per series (docs/forecasting.md)."""
    if t is None:
        return {}
    return {
        "lead_weeks": t.lead_weeks,
        "horizons": list(t.plan.horizons) if t.plan else [],
        "unscored": [h for h in selection.HORIZONS if not t.plan or h not in t.plan.horizons],
        "weights": {str(h): w for h, w in t.weights.items()},
        "runner_up": t.runner_up,
        "why": t.why,
        "trend": t.trend,
        "chart": t.chart(),
    }


def _series_row(
    f: demand.SeriesForecast, run_id: Any, pools: list, tenants: dict[str, Tenant], shown: dict[str, Any]
) -> ForecastSeries:
    tenant, model, region = f.key
    note = "; ".join(n for n in (f.note, "" if pools else placement.UNPLACED) if n)
    scen = {"expected": f.p50, "upside": f.p90}
    t: selection.LeadBacktest | None = f.backtest
    return ForecastSeries(
        run_id=run_id,
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
        error_metric=selection.LEAD_METRIC,
        candidates=[
            {k: v for k, v in row.items() if k in ("method", "selection_error", "holdout_error", "errors", "refused")}
            for row in (t.candidates if t else [])
        ],
        holdout_error=t.holdout_error if t is not None else None,
        coverage=t.coverage if t is not None else {},
        note=note[:200],
        stress_basis=_stress_basis(f),
        selection=_selection(t),
        realised=shown,
    )


def _lead_weeks(chunk: ForecastChunk) -> dict[tuple, int]:
    """A series plans at the longest lead time of the accelerators its pools run on."""
    pools = {p for k in chunk.keys for p, _ in k[3]}
    lead = dict(Pool.objects.filter(pk__in=pools).values_list("pk", "accelerator__lead_time_weeks"))
    return {
        tuple(k[:3]): max((lead[p] for p, _ in k[3] if p in lead), default=pipeline.DEFAULT_LEAD_WEEKS)
        for k in chunk.keys
    }


def _committed(keys: list[tuple]) -> dict[tuple, list[tuple]]:
    """Per series key: the committed-demand changes still in force (docs/forecasting.md)."""
    rows = CommittedAdjustment.objects.filter(
        entitlement__tenant__slug__in={k[0] for k in keys},
        entitlement__revoked_at__isnull=True,
        entitlement_version=F("entitlement__version"),
    ).values_list(
        "entitlement__tenant__slug",
        "entitlement__model__slug",
        "entitlement__region__slug",
        "from_ts",
        "entitlement__ends_at",
        "cu_delta",
        "source",
    )
    out: dict[tuple, list[tuple]] = {}
    for t, m, r, start, until, delta, source in rows.order_by("from_ts", "pk"):
        out.setdefault((t, m, r), []).append((start, until, float(delta), source))
    return out


def execute(*, chunk_id: Any, token: str) -> None:
    """Forecast the chunk's series (a heartbeat per batch), then write them once."""
    from forecasting.services import Parameters

    chunk = ForecastChunk.objects.select_related("run").get(pk=chunk_id)
    params = Parameters.parse(chunk.run.parameters)
    end = params.end_at()
    keys = [tuple(k[:3]) for k in chunk.keys]
    series = history.demand_series(start=end - timedelta(days=params.lookback_days), end=end, keys=keys)
    leads = _lead_weeks(chunk)
    committed = _committed(keys)
    forecasts: list[demand.SeriesForecast] = []
    shown: list[dict[str, Any]] = []
    for i in range(0, len(series), params.batch_size):
        part = series[i : i + params.batch_size]
        fbs, seen = realised.feedback(part, end)
        forecasts += pipeline.forecast_batch(
            part, horizon_h=HORIZON_H, lead_weeks=[leads[s.key] for s in part], feedback=fbs
        )
        shown += seen
        for f in forecasts[-len(part) :]:
            pipeline.apply_committed(f, committed.get(f.key, []))
        if i + params.batch_size < len(series):
            # A heartbeat, and a stop if the claim was lost, between batches; after the last one the write's
            # conditional UPDATE checks the claim itself (a commit less per chunk: an fsync on SQLite).
            checkpoint(chunk_id, token)
        if params.pause_between_batches_s:
            time.sleep(params.pause_between_batches_s)
    _write(chunk, token, forecasts, params, shown)


def _add_pool_shares(run_id: Any, forecasts: list[demand.SeriesForecast], placed: dict) -> None:
    acc: dict[int, dict[str, Any]] = {}
    for f in forecasts:
        for pool_id, share in placed[f.key]:
            a = acc.setdefault(pool_id, {"expected": 0.0, "upside": 0.0, "p99": 0.0, "tenants": {}})
            for k, v in (("expected", f.p50), ("upside", f.p90), ("p99", f.p99)):
                a[k] = a[k] + v * share
            a["tenants"][f.key[0]] = a["tenants"].get(f.key[0], 0.0) + float(f.p50.mean()) * share
    # Locked in pool order: chunks adding to the same pools queue, never deadlock.
    for row in PoolDemand.objects.select_for_update().filter(run_id=run_id, pool_id__in=acc).order_by("pool_id"):
        a = acc[row.pool_id]
        row.hourly = {k: (np.asarray(row.hourly.get(k, 0.0)) + a[k]).tolist() for k in ("expected", "upside", "p99")}
        row.tenants = {t: row.tenants.get(t, 0.0) + a["tenants"].get(t, 0.0) for t in {*row.tenants, *a["tenants"]}}
        row.save(update_fields=["hourly", "tenants"])


def _write(
    chunk: ForecastChunk,
    token: str,
    forecasts: list[demand.SeriesForecast],
    params: Any,
    shown: list[dict[str, Any]] | None = None,
) -> None:
    placed = {tuple(k[:3]): [tuple(p) for p in k[3]] for k in chunk.keys}
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in={k[0] for k in placed})}
    rows = [
        _series_row(f, chunk.run_id, placed[f.key], tenants, seen)
        for f, seen in zip(forecasts, shown or [{}] * len(forecasts), strict=True)
    ]
    with transaction.atomic():
        done = ForecastChunk.objects.filter(
            pk=chunk.pk, state=State.RUNNING, claim_token=token, run__status=RUNNING
        ).update(
            state=State.DONE,
            writes=F("writes") + 1,
            finished_at=timezone.now(),
            profile=demand.day_profile(forecasts).tolist(),
        )
        if not done:
            raise ClaimLost(str(chunk.pk))
        ForecastSeries.objects.bulk_create(rows, batch_size=500)
        _add_pool_shares(chunk.run_id, forecasts, placed)
        # Counting in SQL (not read-then-write): concurrent chunks queue on the run row.
        ForecastRun.objects.filter(pk=chunk.run_id, status=RUNNING).update(
            chunks_done=F("chunks_done") + 1,
            progress=Least(99, (F("chunks_done") + 1) * 100 / F("chunks_total")),
            heartbeat_at=timezone.now(),
        )
        _finish(chunk.run_id, params)


# --- finish -----------------------------------------------------------------------------------------


def _finish(run_id: Any, params: Any) -> bool:
    """In the landing chunk's transaction: succeed the run if every chunk is in, exactly once."""
    if not ForecastRun.objects.filter(pk=run_id, status=RUNNING, chunks_done=F("chunks_total")).update(
        status=ForecastRun.Status.SUCCEEDED,
        progress=100,
        finished_at=timezone.now(),
        results_written=F("results_written") + 1,
        error="",
    ):
        return False
    profile = np.zeros(demand.DAY)
    for p in ForecastChunk.objects.filter(run_id=run_id).values_list("profile", flat=True):
        profile += np.asarray(p or np.zeros(demand.DAY))
    hours = demand.peak_hours(profile, params.spike_hours)
    end = params.end_at()
    lift = demand.uplift(end, HORIZON_H, spike_pct=params.spike_pct, hours=hours)
    day_lift = lift[: demand.DAY]  # hour of day (end.hour + j) % 24 for column j, as in the basis
    count = 0
    series = ForecastSeries.objects.filter(run_id=run_id).only("hourly", "weekly", "stress_basis")
    batch: list[ForecastSeries] = []
    for s in series.iterator(chunk_size=500):
        week_max = np.asarray(s.stress_basis["week_max"])
        s.hourly = {**s.hourly, "stress": _round(np.asarray(s.stress_basis["head"]) * lift[:CHART_HOURS])}
        s.weekly = {**s.weekly, "stress_peak": _round((week_max * day_lift).max(axis=1))}
        s.stress_basis = {}
        batch.append(s)
        count += 1
        if len(batch) == 500:
            ForecastSeries.objects.bulk_update(batch, ["hourly", "weekly", "stress_basis"])
            batch = []
    ForecastSeries.objects.bulk_update(batch, ["hourly", "weekly", "stress_basis"])
    pools = list(PoolDemand.objects.filter(run_id=run_id))
    for p in pools:
        h = {k: np.asarray(p.hourly.get(k, np.zeros(HORIZON_H))) for k in ("expected", "upside", "p99")}
        p.hourly = {"expected": _round(h["expected"]), "upside": _round(h["upside"]), "stress": _round(h["p99"] * lift)}
        total = sum(p.tenants.values()) or 1.0
        p.tenants = {t: round(v / total, 4) for t, v in sorted(p.tenants.items())}
    PoolDemand.objects.bulk_update(pools, ["hourly", "tenants"])
    ForecastRun.objects.filter(pk=run_id).update(series_count=count)
    return True
