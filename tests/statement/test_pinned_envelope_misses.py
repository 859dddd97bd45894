"""Issue 38: a latency miss of a request whose settled output ran past the envelope's max is not the
platform's (the tenant left its envelope); the same miss with the output inside is. Mutation M7 drops
the output check from telemetry.envelopes' per-request classification."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from entitlements.services import entitlement_grant
from telemetry.fold import fold
from telemetry.services import ingest_events
from telemetry.statement import statement
from tests.factories import ENVELOPE, grant_kwargs
from tests.telemetry.helpers import T0

M = timedelta(minutes=1)


def _missed(ent, eid: str, at: timedelta, output: int) -> dict:
    """A settled request that missed its latency target: 10,000 wt, a short prompt."""
    return {
        "event_id": eid, "ts": (T0 + at).isoformat(), "tenant": "acme", "model": "llama-test",
        "region": "us-test", "traffic_class": "reserved", "decision": "complete", "entitlement": str(ent.uuid),
        "estimated_wt": 10_000, "actual_wt": 10_000, "prompt_tokens": 100, "output_tokens": output,
        "ttft_ms": 5000, "e2e_ms": 9000, "slo_met": False,
    }  # fmt: skip


@pytest.mark.django_db
def test_a_miss_with_output_past_the_envelope_max_is_outside_the_promise(fleet):
    ent = entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=T0 - timedelta(hours=1), days=1),
        actor=fleet.operator, reason="test",
    )  # fmt: skip
    over = ENVELOPE.max_output_tokens + 1  # 2,001: one token past the envelope
    got = ingest_events(source="gw", events=[_missed(ent, "long", 0 * M, over), _missed(ent, "short", 2 * M, 100)])
    assert (got.accepted, got.errors) == (2, [])
    fold()
    s = statement(ent, T0, T0 + timedelta(hours=1))
    # both requests: prompt 100 ≤ 8,000; only the output differs
    assert s["latency"]["missed"] == {
        "total": 2, "platform": 1, "outside_envelope": 1, "unclassified": 0, "platform_hours": {T0.isoformat(): 1},
    }  # fmt: skip
    assert s["envelope"]["within"]["output_max"] is False
