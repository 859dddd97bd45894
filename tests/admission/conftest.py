"""Admission fixtures: a fresh backend per test, events collected by a real in-test sink."""

from __future__ import annotations

import os
import uuid

import pytest

from admission import backends, events, params
from admission.backends.memory import MemoryBackend

REDIS_TEST_URL = os.environ.get("ADMISSION_TEST_REDIS_URL", "redis://127.0.0.1:6379/3")


class Collector:
    """The event sink of the tests: keeps every batch it is given."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def __call__(self, batch: list[dict]) -> dict:
        self.events.extend(batch)
        return {"accepted": len(batch), "duplicates": 0, "errors": []}

    def of(self, decision: str) -> list[dict]:
        return [e for e in self.events if e["decision"] == decision]


def redis_backend(**kw):
    """The production timeout is 50 ms; two busy shared cores need more slack in tests."""
    from admission.backends.redis import RedisBackend

    kw.setdefault("socket_timeout", 0.5)
    return RedisBackend(REDIS_TEST_URL, prefix=f"t{uuid.uuid4().hex[:8]}:", **kw)


@pytest.fixture(autouse=True)
def _no_background_sweep(settings):
    """The in-process sweeper (admission.sweeper) would settle a test's reservations behind its
    back; tests/admission/test_expiry.py switches it on where it is the subject."""
    settings.ADMISSION_SWEEP_IN_PROCESS = False


@pytest.fixture
def sink():
    collector = Collector()
    buf = events.EventBuffer(collector, flush_s=3600, autostart=False)
    prev = events.set_buffer(buf)
    yield collector
    buf.stop(flush=False)
    events.set_buffer(prev)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request):
    """Each backend in turn, installed process-wide; Redis keys get a prefix of their own."""
    b = MemoryBackend() if request.param == "memory" else redis_backend()
    prev = backends.set_backend(b)
    params.invalidate()
    yield b
    b.clear()
    backends.set_backend(prev)
    params.invalidate()


@pytest.fixture
def memory_store():
    b = MemoryBackend()
    prev = backends.set_backend(b)
    params.invalidate()
    yield b
    backends.set_backend(prev)
    params.invalidate()
