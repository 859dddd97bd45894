"""The admission tests' event sink and in-process store, as fixtures other folders may use too
(the gateway-token tests in tests/entitlements/api)."""

from __future__ import annotations

import pytest

from admission import backends, events, params
from admission.backends.memory import MemoryBackend


class Collector:
    """The event sink of the tests: keeps every batch it is given."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def __call__(self, batch: list[dict]) -> dict:
        self.events.extend(batch)
        return {"accepted": len(batch), "duplicates": 0, "errors": []}

    def of(self, decision: str) -> list[dict]:
        return [e for e in self.events if e["decision"] == decision]


@pytest.fixture
def sink():
    collector = Collector()
    buf = events.EventBuffer(collector, flush_s=3600, autostart=False)
    prev = events.set_buffer(buf)
    yield collector
    buf.stop(flush=False)
    events.set_buffer(prev)


@pytest.fixture
def memory_store():
    b = MemoryBackend()
    prev = backends.set_backend(b)
    params.invalidate()
    yield b
    backends.set_backend(prev)
    params.invalidate()
