"""A scope's recorded requests from the raw events (telemetry.recorded, issue 45.1): every reservation
at its own time and cost, one streamed read, lumps only past the bound."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest

from entitlements.services import entitlement_grant
from telemetry import recorded
from telemetry.ingest import ingest_events
from tests.factories import grant_kwargs
from tests.reconciliation.conftest import now_hour


def _scope_with_events(fleet):
    ent = entitlement_grant(
        actor=fleet.operator,
        reason="test",
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=now_hour() - timedelta(days=2), days=10),
    )
    start = now_hour() - timedelta(hours=2)
    rng = np.random.default_rng(4)
    t = np.sort(rng.random(300) * 3600)
    cost = rng.integers(100, 5000, 300).astype(float)
    events = []
    for i, (ti, ci) in enumerate(zip(t.tolist(), cost.tolist(), strict=True)):
        decision = "throttle" if i % 10 == 0 else "admit"
        events.append({
            "event_id": f"e{i}", "ts": (start + timedelta(seconds=ti)).isoformat(), "tenant": "acme",
            "model": "llama-test", "region": ent.region.slug, "traffic_class": "reserved",
            "entitlement": str(ent.uuid), "decision": decision, "estimated_wt": ci, "prompt_tokens": 10,
            "reason": "QUOTA_EXCEEDED" if decision == "throttle" else "",
        })  # fmt: skip
    # Another scope's events and a platform throttle are not the scope's asks.
    events.append({**events[1], "event_id": "other", "tenant": "globex", "entitlement": None})
    events.append({**events[2], "event_id": "platform", "decision": "throttle", "reason": "PLATFORM_CAPACITY"})
    assert not ingest_events(source="gw", events=events).errors
    return ent, start, t, cost


def _check(ent, start, t, cost):
    got = recorded.asked(ent, start, start + timedelta(hours=1))
    assert got.requests == 300 and got.throttled == 30 and got.grain_s == 0
    assert np.allclose(got.arrival_s, t, atol=1e-5) and np.array_equal(got.cost_wt, cost)
    return got


@pytest.mark.django_db
def test_every_request_at_its_own_time_and_cost(fleet):
    _check(*_scope_with_events(fleet))


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_packed_postgresql_read_gives_the_same_requests(fleet):
    _check(*_scope_with_events(fleet))


@pytest.mark.django_db
def test_past_the_bound_requests_become_lumps_that_keep_the_total(fleet, monkeypatch):
    ent, start, t, cost = _scope_with_events(fleet)
    monkeypatch.setattr(recorded, "MAX_EXACT", 100)
    got = recorded.asked(ent, start, start + timedelta(hours=1))
    assert got.requests == 300 and got.grain_s > 0 and len(got.arrival_s) <= 100
    assert got.cost_wt.sum() == pytest.approx(cost.sum())


def _lumps_by_hand(t, cost, grain):
    key = np.floor(t / grain)
    first = dict(zip(key.tolist()[::-1], t.tolist()[::-1], strict=True))  # the earliest wins
    total: dict[float, float] = {}
    for k, c in zip(key.tolist(), cost.tolist(), strict=True):
        total[k] = total.get(k, 0.0) + c
    keys = sorted(first)
    return np.array([first[k] for k in keys]), np.array([total[k] for k in keys])


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_scope_over_the_bound_is_lumped_by_the_server_as_by_hand(fleet, monkeypatch):
    ent, start, t, cost = _scope_with_events(fleet)
    monkeypatch.setattr(recorded, "MAX_EXACT", 100)
    assert recorded.expected(ent, start, start + timedelta(hours=1)) == 300  # the minute rollups' count
    monkeypatch.setattr(recorded, "_Requests", None)  # the client-side path is not taken
    got = recorded.asked(ent, start, start + timedelta(hours=1))
    assert got.requests == 300 and got.throttled == 30 and got.grain_s == recorded.lump_grain(3600, 100) == 64
    want_t, want_c = _lumps_by_hand(t, cost, got.grain_s)
    assert np.allclose(got.arrival_s, want_t, atol=1e-5) and np.allclose(got.cost_wt, want_c)
