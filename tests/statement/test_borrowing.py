"""Borrowing on a best_effort entitlement: settled wt above its own rate, minute by minute, and the
pool's reclaim latency in the period."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from admission.models import ReclaimEvent
from entitlements.models import Accelerator
from entitlements.services import entitlement_grant
from telemetry.fold import fold
from telemetry.services import ingest_events
from telemetry.statement import statement
from tests.factories import grant_kwargs
from tests.telemetry.helpers import T0

M = timedelta(minutes=1)


def _done(eid: str, at: timedelta, ent, wt: float) -> dict:
    return {
        "event_id": eid,
        "ts": (T0 + at).isoformat(),
        "tenant": "acme",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "best_effort",
        "entitlement": str(ent.uuid),
        "decision": "complete",
        "actual_wt": wt,
        "prompt_tokens": 10,
        "output_tokens": 10,
    }


@pytest.mark.django_db
def test_borrowed_cu_hours_and_reclaim_latency(fleet):
    Accelerator.objects.filter(slug="h100-test").update(cloud_on_demand_per_hour=2.5)
    kw = grant_kwargs(fleet.pool_a, fleet.acme, Decimal("1"), traffic_class="best_effort", start=T0 - M, days=1)
    ent = entitlement_grant(**kw, overage="borrow", borrowing_limit_cu=Decimal("2"), actor=fleet.operator, reason="t")
    # own rate 1 CU = 60,000 wt a minute: minute 0 settles 90,000 (30,000 above), minute 1 40,000 (none above)
    events = [_done("b1", 10 * timedelta(seconds=1), ent, 50_000), _done("b2", 20 * timedelta(seconds=1), ent, 40_000)]
    events.append(_done("b3", M + timedelta(seconds=5), ent, 40_000))
    assert ingest_events(source="gw", events=events).accepted == 3
    fold()
    for at, ms in ((5 * M, 200.0), (6 * M, 1000.0), (90 * M, 9000.0)):  # the last is after the period
        ReclaimEvent.objects.create(pool=fleet.pool_a, at=T0 + at, latency_ms=ms, borrowers_cut=1)
    s = statement(ent, T0, T0 + 60 * M)
    assert s["borrowing"]["cu_hours"] == 0.008333  # 30,000 wt ÷ 1000 wt/s ÷ 3600 s
    assert s["borrowing"]["reclaim_latency_p95_s"] == 1.0  # p95 (nearest rank) of 200 ms and 1000 ms
    assert s["used"]["peak_share_1m"] == 1.5
    # best_effort pays for what it settled: 130,000 wt = 0.036111 CU-h × $0.285714
    assert s["cost"]["cu_hours"] == 0.036111
    assert s["cost"]["usd"] == 0.01
