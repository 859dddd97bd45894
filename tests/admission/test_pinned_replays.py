"""Issue 38: a replayed request_id whose reservation expired answers `settled: true` on both backends.

test_ids_and_replays pins the replay of a *completed* reservation; an expired one is settled too
(at its estimate), and a replay of it must not be served as a fresh admit. Mutations M1 (memory.py)
and M2 (reserve.lua) in tests/mutations/ take that out; this test fails under each.
"""

from __future__ import annotations

import time

import pytest

from admission import events, keys, services
from tests.admission.world import body, build_world

SCOPE = "acme::llama-test:tiny-region:reserved"


@pytest.fixture
def w(fleet, store, sink):
    return build_world(fleet)


def reserve(b: dict) -> services.Decision:
    return services.reserve(services.parse_reserve(b))


def _expire(store) -> list[str]:
    """Sweep until the store has expired the reservation (Redis decides by its own clock)."""
    for _ in range(200):  # 0.05 s TTL: a few polls on a quiet machine, bounded on a busy one
        got = store.sweep()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError("the reservation never expired")


def test_a_replay_of_an_expired_reservation_answers_settled_and_is_not_served_again(w, store, sink, settings):
    settings.ADMISSION_RESERVATION_TTL_S = 0.05
    first = reserve(body("acme", "reserved", "left"))
    assert first.status == 200 and "settled" not in first.body
    assert len(_expire(store)) == 1  # settled at its estimate by the sweep
    inflight = keys.inflight(keys.tag(store.prefix, w.pool.pk), SCOPE)
    level = store.level(keys.own(keys.tag(store.prefix, w.pool.pk), SCOPE))
    again = reserve(body("acme", "reserved", "left"))
    assert again.status == 200
    assert again.body == {**first.body, "settled": True}
    assert store.inflight(inflight) == 0  # not admitted again: no slot taken
    assert store.level(keys.own(keys.tag(store.prefix, w.pool.pk), SCOPE)) == level  # nor charged
    events.buffer().flush()
    assert [e["event_id"] for e in sink.of("admit")] == ["left"]
