"""A known entitlement with a known set of events, ingested through the real ingest service and folded."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from entitlements.models import Accelerator
from entitlements.services import entitlement_grant
from telemetry.fold import fold
from telemetry.services import ingest_events
from tests.factories import grant_kwargs
from tests.telemetry.helpers import T0

S = timedelta(seconds=1)
M = timedelta(minutes=1)


def _ev(eid: str, at: timedelta, ent: Any, **kw: Any) -> dict[str, Any]:
    e = {
        "event_id": eid,
        "ts": (T0 + at).isoformat(),
        "tenant": "acme",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "reserved",
        "decision": "admit",
        "estimated_wt": 100,
        "prompt_tokens": 10,
    }
    if ent is not None:
        e["entitlement"] = str(ent.uuid)
    e.update(kw)
    return e


def _done(eid: str, at: timedelta, ent: Any, act: float, prompt: int, out: int, **kw: Any) -> dict[str, Any]:
    return _ev(eid, at, ent, decision="complete", actual_wt=act, prompt_tokens=prompt, output_tokens=out, **kw)


@pytest.fixture
def known(fleet):
    """2 CU reserved on llama-test (R = 1000 wt/s), from T0 − 1 h to T0 + 1 day; $2.50/h per H100."""
    Accelerator.objects.filter(slug="h100-test").update(cloud_on_demand_per_hour=2.5)
    ent = entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=T0 - timedelta(hours=1), days=1),
        actor=fleet.operator,
        reason="test",
    )
    other = entitlement_grant(
        **grant_kwargs(fleet.pool_b, fleet.globex, Decimal("1"), start=T0 - timedelta(hours=1), days=1),
        actor=fleet.operator,
        reason="test",
    )
    done = [
        # five settled requests: wt, prompt, output, latency
        _done("c1", 10 * S, ent, 60_000, 1000, 200, ttft_ms=100, e2e_ms=900, slo_met=True),
        _done("c2", 20 * S, ent, 30_000, 3000, 600, ttft_ms=5000, e2e_ms=9000, slo_met=False),
        _done("c5", 2 * M, ent, 24_000, 200, 100, ttft_ms=80, e2e_ms=500, slo_met=True),
        _done("c3", 61 * M, ent, 12_000, 500, 100, ttft_ms=50, e2e_ms=400, slo_met=True),
        _done("c4", 61 * M + 30 * S, ent, 6_000, 100, 50),  # reported no latency at all
    ]
    # the store's count of reservations in flight right after each admit: the peak is 3
    admits = [_ev(f"a{i}", i * S, ent, in_flight=n) for i, n in enumerate([1, 2, 3, 2, 1])]
    throttles = [
        _ev("o1", 5 * M, ent, decision="throttle", reason="OUTSIDE_ENVELOPE", prompt_tokens=9000),
        _ev("o2", 5 * M, ent, decision="throttle", reason="OUTSIDE_ENVELOPE", prompt_tokens=9500),
        _ev("q1", 6 * M, ent, decision="throttle", reason="QUOTA_EXCEEDED"),
        _ev("k1", 7 * M, ent, decision="throttle", reason="CONCURRENCY_LIMIT"),
        _ev("n1", 8 * M, ent, decision="throttle", reason="NOT_ENTITLED"),
        _ev("r1", 9 * M, ent, decision="throttle", reason="RECLAIMED"),
        _ev("p1", 70 * M, ent, decision="throttle", reason="PLATFORM_CAPACITY"),
        _ev("p2", 71 * M, ent, decision="throttle", reason="PLATFORM_CAPACITY"),
        # unattributed, but the entitlement's exact scope: it counts (the platform found no pool)
        _ev("l1", 72 * M, None, decision="throttle", reason="PLACEMENT"),
        _ev("u1", 73 * M, ent, decision="throttle", reason="ADMISSION_UNAVAILABLE"),
    ]
    noise = [
        _ev("late", 3 * 60 * M, ent),  # after the period
        _ev("early", -30 * M, ent),  # before it
        _ev("g1", 3 * M, other, tenant="globex"),  # another tenant's entitlement
        _done("g2", 3 * M, other, 50_000, 100, 100, tenant="globex", slo_met=False),
        _ev("s1", 4 * M, None, traffic_class="best_effort", decision="throttle", reason="QUOTA_EXCEEDED"),
    ]
    result = ingest_events(source="gw", events=done + admits + throttles + noise)
    assert result.accepted == 25 and not result.errors
    fold()
    return ent
