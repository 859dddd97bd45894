"""A committed-demand change (an accepted reconciliation finding's CommittedAdjustment) shows up in
the next forecast of its series (issue 32)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.utils import timezone

from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from forecasting import chunks, pipeline, services
from forecasting.demand import SeriesForecast
from forecasting.models import CommittedAdjustment, ForecastRun, ForecastSeries, PoolDemand
from reconciliation.models import Finding
from reconciliation.services import finding_accept
from tests.factories import grant_kwargs
from tests.forecasting.helpers import END, cycles_cu, write_demand


def _forecast(n: int = 4 * 168) -> SeriesForecast:
    flat = np.full(n, 10.0)
    return SeriesForecast(
        ("acme", "llama-test", "us-test"), "mstl", 840, END, flat.copy(), flat * 1.2, flat * 1.5, flat[:168]
    )


def test_a_committed_change_moves_every_band_from_its_date_to_the_entitlements_end():
    f = _forecast()
    pipeline.apply_committed(f, [(END + timedelta(weeks=1), END + timedelta(weeks=3), -4.0, "finding 7")])
    assert (f.p50[167], f.p50[168], f.p50[3 * 168 - 1], f.p50[3 * 168]) == (10.0, 6.0, 6.0, 10.0)
    assert (f.p90[168], f.p99[168]) == (8.0, 11.0)
    assert f.note == "-4.00 CU committed from 2026-03-09 (finding 7)"
    # never below zero, and a change that ended before the forecast starts changes nothing
    g = _forecast()
    pipeline.apply_committed(
        g, [(END, None, -50.0, "a"), (END - timedelta(weeks=3), END - timedelta(weeks=1), 5.0, "b")]
    )
    assert (g.p50.max(), g.note) == (0.0, "-50.00 CU committed from 2026-03-02 (a)")


def test_the_run_reads_the_changes_still_at_their_entitlements_version(fleet):
    ent = entitlement_grant(
        actor=fleet.operator,
        reason="test",
        **grant_kwargs(fleet.pool_a, fleet.acme, "20", start=END - timedelta(days=30), days=90),
    )
    CommittedAdjustment.objects.create(
        entitlement=ent, cu_delta=Decimal("-1.400"), from_ts=END, entitlement_version=ent.version, source="finding 1"
    )
    # lapsed: made for an earlier version, the amendment carries it
    CommittedAdjustment.objects.create(
        entitlement=ent, cu_delta=Decimal("9"), from_ts=END, entitlement_version=ent.version - 1, source="finding 0"
    )
    got = chunks._committed([("acme", "llama-test", "us-test")])
    assert got == {("acme", "llama-test", "us-test"): [(END, ent.ends_at, -1.4, "finding 1")]}


@pytest.mark.slow
def test_an_accepted_finding_moves_the_next_forecast_and_its_pools_demand(fleet, django_capture_on_commit_callbacks):
    # Given five weeks of acme's demand ending at the last whole hour, and its entitlement in pool-a
    end = timezone.now().replace(minute=0, second=0, microsecond=0)
    ent = entitlement_grant(
        actor=fleet.operator,
        reason="test",
        **grant_kwargs(fleet.pool_a, fleet.acme, "20", start=end - timedelta(days=40), days=400),
    )
    write_demand(
        tenant="acme", model="llama-test", region="us-test", cu=cycles_cu(5 * 168, base=8, seed=5), r=1000, end=end
    )

    def run_forecast() -> ForecastRun:
        with django_capture_on_commit_callbacks(execute=True):
            run = services.forecast_run_request(parameters={"end": end.isoformat()})
        run.refresh_from_db()
        assert run.status == "succeeded", run.error
        return run

    before = run_forecast()
    # When reconciliation's right-size finding (-1.4 CU) is accepted through its service
    finding = Finding.objects.create(
        entitlement=ent, tenant=fleet.acme, pool=fleet.pool_a, kind=Finding.Kind.RIGHT_SIZE_DOWN,
        window_start=end - timedelta(days=14), window_end=end, action="right-size to 18.6 CU",
        cu_delta=Decimal("-1.400"),
    )  # fmt: skip
    finding_accept(actor=fleet.operator, finding=finding, reason="the tenant agreed")
    after = run_forecast()
    # Then the next forecast of the series is 1.4 CU lower from the hour it was accepted, says why, and
    # the pool's demand follows (the same history, so everything else is the same forecast)
    old, new = (ForecastSeries.objects.get(run=r) for r in (before, after))
    assert new.note.endswith(
        f"-1.40 CU committed from {end:%Y-%m-%d} (reconciliation finding {finding.pk} (right_size_down))"
    )
    assert old.method == new.method
    for k in ("expected", "upside", "p99"):
        want = np.clip(np.asarray(old.hourly[k]) - 1.4, 0.0, None)
        assert np.allclose(new.hourly[k], want), k
    pool_old, pool_new = (PoolDemand.objects.get(run=r, pool=fleet.pool_a) for r in (before, after))
    assert np.allclose(pool_new.hourly["expected"], np.clip(np.asarray(pool_old.hourly["expected"]) - 1.4, 0, None))
    # and once the entitlement is amended (its version moves on), the adjustment no longer counts
    assert chunks._committed([("acme", "llama-test", "us-test")]) != {}
    Entitlement.objects.filter(pk=ent.pk).update(cu=Decimal("18.6"))
    assert chunks._committed([("acme", "llama-test", "us-test")]) == {}
