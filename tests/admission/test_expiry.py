"""Issue 12.5: reservations past their TTL are settled without beat (on access, and by the web process)."""

from __future__ import annotations

import time

import pytest

from admission import events, keys, services, sweeper
from tests.admission.world import body, build_world


@pytest.fixture
def w(fleet, store, sink):
    return build_world(fleet)


def reserve(b: dict):
    return services.reserve(services.parse_reserve(b))


def test_a_reserve_settles_its_scopes_expired_reservations_below_the_cap(w, store, sink, settings):
    settings.ADMISSION_RESERVATION_TTL_S = 0.05
    reserve(body("acme", "reserved", "abandoned-1"))
    reserve(body("acme", "reserved", "abandoned-2"))
    time.sleep(0.1)
    settings.ADMISSION_RESERVATION_TTL_S = 600
    reserve(body("acme", "reserved", "next"))  # cap 64: far from it, and no sweep has run
    events.buffer().flush()
    assert sorted((e["event_id"], e["status"]) for e in sink.of("complete")) == [
        ("abandoned-1:complete", "expired"), ("abandoned-2:complete", "expired"),
    ]  # fmt: skip
    assert (
        store.inflight(keys.inflight(keys.tag(store.prefix, w.pool.pk), "acme::llama-test:tiny-region:reserved")) == 1
    )


def test_without_beat_the_web_process_sweeps_scopes_that_see_no_traffic(w, store, sink, settings):
    settings.ADMISSION_RESERVATION_TTL_S = 0.05
    settings.ADMISSION_SWEEP_EVERY_S = 0.05
    settings.CELERY_TASK_ALWAYS_EAGER = True  # no broker, so no beat
    settings.ADMISSION_SWEEP_IN_PROCESS = None  # the default: on exactly when there is no beat
    assert sweeper.wanted()
    sweeper.stop()
    try:
        reserve(body("acme", "reserved", "left-behind"))  # starts the sweeper; nothing reserves after it
        for _ in range(100):  # up to ~5 s on a busy machine
            events.buffer().flush()
            if sink.of("complete"):
                break
            time.sleep(0.05)
        assert [(e["event_id"], e["status"]) for e in sink.of("complete")] == [("left-behind:complete", "expired")]
    finally:
        sweeper.stop()


def test_with_a_broker_beat_sweeps_and_the_web_process_does_not(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.ADMISSION_SWEEP_IN_PROCESS = None
    assert not sweeper.wanted()
