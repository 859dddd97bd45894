"""A batch handed to the broker and lost on the way to the worker is sent again (admission.event_receipts).

kombu's Redis transport pops a message before it records it as unacknowledged: a worker that loses the
broker in that window (or exits with the reply unread) leaves nothing to redeliver. The broker here is a
stand-in that takes the first hand-off and drops it, as that window does; PostgreSQL (the receipts' source
of truth) and ingest are the real ones. The clock is held, so every wait is exact.
"""

from __future__ import annotations

import pytest

from admission import events, sinks
from admission.event_receipts import Receipts
from telemetry.models import AdmissionEvent, DeadLetter
from tests.admission.world import body, build_world


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LossyBroker:
    """Takes every hand-off (HANDED_OFF, as a publish the broker acknowledged); the first `lose` of them
    never reach a worker; the others are ingested, as a worker would."""

    def __init__(self, lose: int = 1, refuse: int = 0) -> None:
        self.lose, self.refuse, self.handed = lose, refuse, []

    def __call__(self, batch: list[dict]):
        if self.refuse:
            self.refuse -= 1
            raise ConnectionError("broker away")
        self.handed.append([e["event_id"] for e in batch])
        if self.lose:
            self.lose -= 1
            return events.HANDED_OFF
        sinks.ingest(batch)
        return events.HANDED_OFF


def decisions(w, n: int, prefix: str = "r") -> list[dict]:
    """Real admission events: n reserves answered by the store, taken from the test sink."""
    from admission import services

    for i in range(n):
        services.reserve(services.parse_reserve(body("acme", "reserved", f"{prefix}{i}", prompt=10, out=10)))
    events.buffer().flush()  # the test sink's buffer hands them to the collector
    return list(w.sink.events)


@pytest.fixture
def w(fleet, memory_store, sink):
    world = build_world(fleet)
    world.sink = sink
    return world


def buffer_with(broker, clock, **kw) -> events.EventBuffer:
    receipts = Receipts(sinks.recorded, after_s=30, tries=kw.pop("tries", 3), clock=clock, **kw)
    return events.EventBuffer(
        broker, flush_s=3600, autostart=False, receipts=receipts, dead_letter=sinks.dead_letter_batch
    )


def stored() -> set[str]:
    return set(AdmissionEvent.objects.values_list("event_id", flat=True))


def test_a_batch_the_broker_lost_is_sent_again_once_its_wait_is_over(w):
    evs = decisions(w, 3)
    clock, broker = Clock(), LossyBroker(lose=1)
    buf = buffer_with(broker, clock)
    for e in evs:
        buf.emit(e)
    assert buf.flush() == 3
    assert stored() == set()  # handed off, acknowledged, and gone: the window
    clock.now += 29.9
    assert buf.check_receipts() == 0  # not yet due: nothing asked, nothing sent
    clock.now += 0.1
    assert buf.check_receipts() == 3
    assert stored() == {"r0", "r1", "r2"}
    clock.now += 60
    assert buf.check_receipts() == 0  # the resend's receipt: all there, let go
    assert buf.stats()["confirmed"] == 3 and buf.receipts.pending() == 0
    assert broker.handed == [["r0", "r1", "r2"], ["r0", "r1", "r2"]]


def test_only_the_missing_events_are_sent_again(w):
    evs = decisions(w, 4)
    sinks.ingest(evs[:3])  # three got through another way (a slow delivery); one did not
    clock, broker = Clock(), LossyBroker(lose=1)
    buf = buffer_with(broker, clock)
    for e in evs:
        buf.emit(e)
    buf.flush()
    clock.now += 30
    assert buf.check_receipts() == 1
    assert broker.handed[-1] == [evs[3]["event_id"]]
    assert stored() == {e["event_id"] for e in evs}
    assert AdmissionEvent.objects.count() == 4  # ingest dedups: nothing twice


def test_a_batch_never_recorded_is_dead_lettered_after_its_last_resend_with_the_reason(w):
    evs = decisions(w, 2)
    clock, broker = Clock(), LossyBroker(lose=10)
    buf = buffer_with(broker, clock, tries=2)
    for e in evs:
        buf.emit(e)
    buf.flush()
    for wait in (30, 60, 120):  # the wait doubles with each resend
        clock.now += wait - 0.1
        assert buf.check_receipts() == 0
        clock.now += 0.1
        buf.check_receipts()
    assert len(broker.handed) == 3  # the hand-off and two resends
    (dl,) = DeadLetter.objects.filter(stage=sinks.STAGE)
    assert [e["event_id"] for e in dl.payload] == ["r0", "r1"]
    assert "not recorded 210 s after hand-off, resent 2 times" in dl.error
    assert buf.receipts.pending() == 0 and buf.stats()["unrecorded"] == 2


def test_a_broker_away_at_resend_time_keeps_the_batch_and_its_tries(w):
    evs = decisions(w, 1)
    clock, broker = Clock(), LossyBroker(lose=1)
    buf = buffer_with(broker, clock, tries=1)
    buf.emit(evs[0])
    buf.flush()
    broker.refuse = 3
    for _ in range(3):
        clock.now += 30
        assert buf.check_receipts() == 0
    assert buf.receipts.pending() == 1 and not DeadLetter.objects.exists()
    clock.now += 30
    assert buf.check_receipts() == 1
    assert stored() == {"r0"}


def test_unreadable_receipts_resend_nothing_blind(w):
    evs = decisions(w, 1)
    clock, broker = Clock(), LossyBroker(lose=1)
    down = {"now": True}

    def confirm(ids):
        if down["now"]:
            raise ConnectionError("database away")
        return sinks.recorded(ids)

    buf = events.EventBuffer(broker, flush_s=3600, autostart=False,
                             receipts=Receipts(confirm, after_s=30, clock=clock))  # fmt: skip
    buf.emit(evs[0])
    buf.flush()
    clock.now += 30
    assert buf.check_receipts() == 0 and len(broker.handed) == 1
    down["now"] = False
    clock.now += 30
    assert buf.check_receipts() == 1 and stored() == {"r0"}


def test_tracking_is_bounded_and_counts_what_it_let_go(w):
    evs = decisions(w, 3)
    clock, broker = Clock(), LossyBroker(lose=0)
    buf = events.EventBuffer(broker, batch=2, flush_s=3600, autostart=False,
                             receipts=Receipts(sinks.recorded, after_s=30, bound=2, clock=clock))  # fmt: skip
    for e in evs:
        buf.emit(e)
    buf.flush()
    assert buf.receipts.pending() == 2 and buf.stats()["untracked"] == 1


def test_an_inline_sink_is_never_tracked(w):
    """Without a broker the sink records before it returns: there is no receipt to wait for."""
    evs = decisions(w, 2)
    clock = Clock()
    buf = events.EventBuffer(sinks.ingest, flush_s=3600, autostart=False,
                             receipts=Receipts(sinks.recorded, after_s=30, clock=clock))  # fmt: skip
    for e in evs:
        buf.emit(e)
    buf.flush()
    assert buf.receipts.pending() == 0 and stored() == {"r0", "r1"}


def test_the_served_buffer_keeps_receipts_and_the_broker_sink_says_handed_off(w, settings):
    from admission import tasks

    settings.ADMISSION_EVENT_CONFIRM_S, settings.ADMISSION_EVENT_CONFIRM_TRIES = 7, 4
    prev = events.set_buffer(None)
    try:
        buf = events.buffer()
        assert (buf.receipts.after_s, buf.receipts.tries) == (7, 4)
        assert buf.receipts.confirm([]) == set()  # the configured confirm is admission.sinks.recorded
    finally:
        events.set_buffer(prev)
    settings.CELERY_TASK_ALWAYS_EAGER = False  # a broker: the batch is published (here Celery runs it eagerly)
    assert tasks.default_sink(decisions(w, 1)) is events.HANDED_OFF
