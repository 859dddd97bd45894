"""Admission fixtures: a fresh backend per test, events collected by a real in-test sink."""

from __future__ import annotations

import uuid

import pytest

from admission import backends, params
from admission.backends.memory import MemoryBackend
from tests.admission.cluster import store_url
from tests.admission.sinks import Collector, memory_store, sink  # noqa: F401 - shared with the token tests


def redis_backend(url: str, **kw):
    """A backend with a key prefix of its own on `url` (the session's `redis_url`). The production
    timeout is 50 ms; two busy shared cores need more slack in tests."""
    from admission.backends.redis import RedisBackend

    kw.setdefault("socket_timeout", 0.5)
    return RedisBackend(url, prefix=f"t{uuid.uuid4().hex[:8]}:", **kw)


@pytest.fixture(autouse=True)
def _no_background_sweep(settings):
    """The in-process sweeper (admission.sweeper) would settle a test's reservations behind its
    back; tests/admission/test_expiry.py switches it on where it is the subject."""
    settings.ADMISSION_SWEEP_IN_PROCESS = False


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request):
    """Each backend in turn, installed process-wide; Redis keys get a prefix of their own."""
    b = MemoryBackend() if request.param == "memory" else redis_backend(store_url(request.getfixturevalue("redis_url")))
    prev = backends.set_backend(b)
    params.invalidate()
    yield b
    b.clear()
    backends.set_backend(prev)
    params.invalidate()
