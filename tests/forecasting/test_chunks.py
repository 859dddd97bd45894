"""Issue 21.2: a run fanned out in chunks — each claimed and written once, the run finished once,
and the results the same however the series are cut (the stress spike spans every chunk)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from entitlements.services import entitlement_grant
from forecasting import chunks, demand, history, pipeline, services
from forecasting.models import ForecastChunk, ForecastRun, ForecastSeries, PoolDemand
from tests.factories import grant_kwargs
from tests.forecasting.helpers import END, daily_cu, write_demand

TENANTS = ("acme", "globex")


@pytest.fixture
def demand_in_pools(fleet):
    for pool, tenant in ((fleet.pool_a, fleet.acme), (fleet.pool_b, fleet.globex)):
        entitlement_grant(
            actor=fleet.operator,
            reason="test",
            **grant_kwargs(pool, tenant, "100", start=END - timedelta(days=30), days=60),
        )
    for i, tenant in enumerate(TENANTS):
        cu = daily_cu(24 * 21, base=60 + 10 * i, amp=30, noise=3, seed=i)
        write_demand(tenant=tenant, model="llama-test", region="us-test", cu=cu, r=1000)
    return fleet


def _planned(chunk_size: int) -> ForecastRun:
    run = ForecastRun.objects.create(parameters={"end": END.isoformat(), "chunk_size": chunk_size})
    assert services.forecast_run_claim(run_id=run.pk, worker="planner") == "claimed"
    services.forecast_run_plan(run_id=run.pk, worker="planner")
    return run


def _land(chunk: ForecastChunk, token: str) -> None:
    assert chunks.claim(chunk_id=chunk.pk, token=token) == "claimed"
    chunks.execute(chunk_id=chunk.pk, token=token)


def _results(run: ForecastRun) -> tuple[list, list]:
    series = [
        (s.tenant_slug, s.method, s.hourly, s.weekly, s.stress_basis) for s in ForecastSeries.objects.filter(run=run)
    ]
    pools = [(p.pool_id, p.hourly, p.tenants) for p in PoolDemand.objects.filter(run=run).order_by("pool_id")]
    return series, pools


@pytest.mark.slow
def test_one_chunk_per_series_gives_the_results_of_one_chunk_for_all(demand_in_pools):
    split, whole = _planned(1), _planned(100)
    assert (split.chunks.count(), whole.chunks.count()) == (2, 1)
    for run in (split, whole):
        for i, chunk in enumerate(run.chunks.all()):
            _land(chunk, f"w{i}")
        run.refresh_from_db()
        assert (run.status, run.results_written, run.series_count, run.progress) == ("succeeded", 1, 2, 100)
    assert _results(split) == _results(whole)
    # and the stress scenario is the one computed over all the series at once (spike hours shared)
    end = services.Parameters.parse(split.parameters).end_at()
    lookback = services.Parameters.parse(split.parameters).lookback_days
    forecasts = pipeline.forecast_batch(
        history.demand_series(start=end - timedelta(days=lookback), end=end), horizon_h=chunks.HORIZON_H
    )
    hours = demand.spike_hours(forecasts, 3)
    for f, s in zip(forecasts, ForecastSeries.objects.filter(run=split), strict=True):
        stress = demand.stress(f, spike_pct=20.0, hours=hours)
        assert s.hourly["stress"] == chunks._round(stress[: chunks.CHART_HOURS])
        assert s.weekly["stress_peak"] == chunks._weekly(stress, agg="max")
        assert s.stress_basis == {}
    pool_a = PoolDemand.objects.get(run=split, pool=demand_in_pools.pool_a)
    acme = next(f for f in forecasts if f.key[0] == "acme")
    assert pool_a.hourly["stress"] == chunks._round(demand.stress(acme, spike_pct=20.0, hours=hours))
    assert pool_a.tenants == {"acme": 1.0}


@pytest.mark.slow
def test_the_last_chunk_finishes_the_run_once_and_a_redelivered_chunk_writes_nothing(demand_in_pools):
    run = _planned(1)
    first, second = run.chunks.all()
    _land(first, "w1")
    run.refresh_from_db()
    assert (run.status, run.chunks_done, run.chunks_total, run.progress) == ("running", 1, 2, 50)
    assert PoolDemand.objects.filter(run=run).count() == 2
    _land(second, "w2")
    run.refresh_from_db()
    assert (run.status, run.chunks_done, run.results_written) == ("succeeded", 2, 1)
    assert chunks._finish(run.pk, services.Parameters.parse(run.parameters)) is False  # already finished
    assert chunks.claim(chunk_id=first.pk, token="w3") == "done"  # a redelivery of a written chunk
    run.refresh_from_db()
    assert run.results_written == 1
    assert [c.writes for c in run.chunks.all()] == [1, 1]
    assert ForecastSeries.objects.filter(run=run).count() == 2


def test_a_stale_chunk_is_taken_over_and_the_old_claimant_cannot_write(demand_in_pools, settings):
    settings.FORECAST_RUN_STALE_AFTER_S = 60
    run = _planned(1)
    chunk = run.chunks.first()
    assert chunks.claim(chunk_id=chunk.pk, token="w1") == "claimed"
    assert chunks.claim(chunk_id=chunk.pk, token="w2") == "busy"
    ForecastChunk.objects.filter(pk=chunk.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    assert chunks.claim(chunk_id=chunk.pk, token="w2") == "claimed"
    with pytest.raises(chunks.ClaimLost):
        chunks.checkpoint(chunk.pk, "w1")
    with pytest.raises(chunks.ClaimLost):
        chunks._write(chunk, "w1", [], services.Parameters.parse(run.parameters))
    chunk.refresh_from_db()
    assert (chunk.state, chunk.claim_token, chunk.attempts, chunk.writes) == ("running", "w2", 2, 0)
    assert not ForecastSeries.objects.filter(run=run).exists()


def test_a_failed_chunk_fails_the_run_and_the_others_stop(demand_in_pools):
    run = _planned(1)
    first, second = run.chunks.all()
    chunks.claim(chunk_id=first.pk, token="w1")
    chunks.claim(chunk_id=second.pk, token="w2")
    chunks.fail(chunk_id=first.pk, token="w1", error="ValueError: boom")
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", "ValueError: boom")
    with pytest.raises(chunks.ClaimLost):
        chunks.checkpoint(second.pk, "w2")
    assert chunks.claim(chunk_id=second.pk, token="w3") == "done"


def test_a_run_with_no_series_succeeds_at_once(fleet):
    run = _planned(10)
    run.refresh_from_db()
    assert (run.status, run.chunks_total, run.series_count, run.results_written) == ("succeeded", 0, 0, 1)
