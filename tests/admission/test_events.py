"""The event buffer: bounded, flushed in batches off the hot path, nothing lost while the sink is down."""

from __future__ import annotations

import threading

from admission.events import EventBuffer
from tests.admission.conftest import Collector


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
        "pending": 0,
        "bound": 100_000,
    }
    assert buf._backoff == 0.0
    buf.stop(flush=False)


def test_backoff_doubles_up_to_its_cap():
    buf = EventBuffer(FlakySink(failures=99), flush_s=1, max_backoff_s=8, autostart=False)
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
