"""The event buffer: bounded, flushed in batches off the hot path, nothing lost while the sink is down."""

from __future__ import annotations

import threading

import pytest

from admission.events import EventBuffer
from tests.admission.sinks import Collector


class FlakySink(Collector):
    """Refuses the first `failures` calls, as a sink that is briefly unavailable would."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("telemetry is restarting")
        return super().__call__(batch)


def ev(i: int) -> dict:
    return {"event_id": f"e{i}", "decision": "admit"}


def test_no_event_lost_while_the_sink_is_briefly_unavailable():
    sink = FlakySink(failures=2)
    buf = EventBuffer(sink, batch=4, flush_s=3600, max_backoff_s=8, autostart=False)
    for i in range(10):
        buf.emit(ev(i))
    assert (buf.flush(), buf.pending(), buf._backoff) == (0, 10, 8)  # capped
    assert (buf.flush(), buf.pending()) == (0, 10)
    assert buf.flush() == 10
    assert [e["event_id"] for e in sink.events] == [f"e{i}" for i in range(10)]
    assert buf.stats() == {
        "emitted": 10,
        "flushed": 10,
        "dropped": 0,
        "rejected": 0,
        "sink_failures": 2,
        "dead_lettered": 0,
        "pending": 0,
        "bound": 100_000,
    }
    assert buf._backoff == 0.0
    buf.stop(flush=False)


def test_backoff_doubles_up_to_its_cap():
    buf = EventBuffer(FlakySink(failures=99), flush_s=1, max_backoff_s=8, autostart=False, max_attempts=99)
    buf.emit(ev(0))
    seen = []
    for _ in range(5):
        buf.flush()
        seen.append(buf._backoff)
    assert seen == [1, 2, 4, 8, 8]
    buf.stop(flush=False)


def test_overflow_beyond_the_bound_is_counted():
    buf = EventBuffer(Collector(), bound=5, flush_s=3600, autostart=False)
    for i in range(8):
        buf.emit(ev(i))
    s = buf.stats()
    assert (s["pending"], s["dropped"], s["emitted"]) == (5, 3, 5)
    buf.stop(flush=False)


def test_rejected_events_are_counted_not_retried():
    def sink(batch):
        return {"accepted": len(batch) - 1, "duplicates": 0, "errors": [{"index": 0, "field": "ts", "message": "x"}]}

    buf = EventBuffer(sink, flush_s=3600, autostart=False)
    buf.emit(ev(0))
    buf.emit(ev(1))
    assert buf.flush() == 2
    assert (buf.stats()["rejected"], buf.pending()) == (1, 0)
    buf.stop(flush=False)


def test_background_thread_flushes_a_full_batch():
    got = threading.Event()
    sink = Collector()

    def signalling_sink(batch):
        sink(batch)
        got.set()

    buf = EventBuffer(signalling_sink, batch=3, flush_s=3600)  # only a full batch can wake the thread
    for i in range(3):
        buf.emit(ev(i))
    assert got.wait(30)  # a hang guard, not a timing assertion
    assert [e["event_id"] for e in sink.events] == ["e0", "e1", "e2"]
    buf.stop()


class PoisonSink(Collector):
    """Raises on any batch holding a poison event (as PostgreSQL did on a NUL byte), takes the rest."""

    def __call__(self, batch):
        if any(e["event_id"].startswith("poison") for e in batch):
            raise ValueError("A string literal cannot contain NUL (0x00) characters.")
        return super().__call__(batch)


@pytest.mark.django_db
def test_a_batch_the_sink_keeps_refusing_is_dead_lettered_after_its_attempts_and_the_rest_goes_on():
    from telemetry.models import DeadLetter

    sink = PoisonSink()
    buf = EventBuffer(sink, batch=2, flush_s=0.001, max_backoff_s=0.001, autostart=False, max_attempts=3)
    for e in [ev(0), {"event_id": "poison-1", "decision": "admit"}, ev(2), ev(3)]:
        buf.emit(e)
    sent = [buf.flush() for _ in range(3)]
    assert sent == [0, 0, 2]  # two attempts back off; the third quarantines the batch and goes on
    assert [e["event_id"] for e in sink.events] == ["e2", "e3"]
    row = DeadLetter.objects.get(stage="admission.events")
    assert (row.key, [e["event_id"] for e in row.payload]) == ("e0+1", ["e0", "poison-1"])
    assert "NUL" in row.error and buf.stats()["dead_lettered"] == 2


def test_a_batch_is_kept_when_its_dead_letter_fails_too():
    def down(batch, error):
        raise ConnectionError("database down as well")

    buf = EventBuffer(PoisonSink(), batch=2, flush_s=3600, autostart=False, max_attempts=1, dead_letter=down)
    buf.emit({"event_id": "poison-1", "decision": "admit"})
    assert (buf.flush(), buf.pending(), buf.stats()["dead_lettered"]) == (0, 1, 0)


def test_shutdown_sends_what_is_buffered_within_its_bound():
    sink = FlakySink(failures=1)
    buf = EventBuffer(sink, batch=4, flush_s=3600, autostart=False)
    for i in range(10):
        buf.emit(ev(i))
    assert buf.shutdown(5.0) == 0
    assert [e["event_id"] for e in sink.events] == [f"e{i}" for i in range(10)]


def test_shutdown_dead_letters_what_the_sink_still_refuses_at_the_bound():
    quarantined = []
    buf = EventBuffer(FlakySink(failures=10**6), flush_s=3600, autostart=False, max_attempts=10**6,
                      dead_letter=lambda batch, error: quarantined.append((len(batch), error)))  # fmt: skip
    for i in range(3):
        buf.emit(ev(i))
    assert buf.shutdown(5.0) == 0  # three refusals, not the whole bound
    assert quarantined == [(3, "sink still failing at shutdown after 5.0 s")]
