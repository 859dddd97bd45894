"""A committed-demand change (an accepted reconciliation finding's CommittedAdjustment) shows up in
the next forecast of its series (issue 32)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import numpy as np

from entitlements.services import entitlement_grant
from forecasting import chunks, pipeline
from forecasting.demand import SeriesForecast
from forecasting.models import CommittedAdjustment
from tests.factories import grant_kwargs
from tests.forecasting.helpers import END


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
