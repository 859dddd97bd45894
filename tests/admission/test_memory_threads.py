"""The in-process backend driven from many threads (issue 12.10): its one lock is what keeps it exact.

The negative control runs the same load with the lock replaced by a no-op: it over-admits, so the
exact assertions of the first test are the lock's, not luck's.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid

import pytest

from admission.backends.memory import MemoryBackend
from tests.admission.test_backend_contract import complete, op

THREADS, PER_THREAD, DEPTH = 16, 150, 1000.0


@pytest.fixture
def switch_often():
    """Switch threads every microsecond, so a read-modify-write without the lock is interleaved."""
    prev = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(prev)


def widen(backend: MemoryBackend) -> MemoryBackend:
    """Yield the thread between reading a bucket and writing it back, so a read-modify-write without
    the lock is interleaved every time, not by luck. Both tests run widened: only the lock differs."""
    level = backend._level

    def slow_level(*args: object, **kwargs: object) -> float:
        value = level(*args, **kwargs)  # type: ignore[arg-type]
        time.sleep(0.0001)
        return value

    backend._level = slow_level  # type: ignore[method-assign]
    return backend


def hammer(backend: MemoryBackend) -> int:
    """16 threads reserve 1 wt (cap 8 in flight) and settle it at exactly its estimate. → admissions."""
    admitted = []
    count = threading.Lock()  # the test's own bookkeeping, not the backend's

    def worker() -> None:
        for _ in range(PER_THREAD):
            a = backend.reserve(op(cost=1.0, own=(0.0, DEPTH), pool=(0.0, 10 * DEPTH), maxc=8, req=uuid.uuid4().hex))
            if not a.admitted:
                continue
            with count:
                admitted.append(a)
            complete(backend, a.parts()[1], prompt=1, output=0)  # actual 1 wt: nothing refunded

    ts = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return len(admitted)


def test_many_threads_never_over_admit_the_in_process_backend(switch_often):
    b = widen(MemoryBackend())
    n = hammer(b)
    # Every admission and every settlement is exact: each bucket is down by exactly the admissions,
    # never below empty, and nothing is left in flight.
    assert 0 < n <= DEPTH
    assert b.level("b:s1") == DEPTH - n
    assert b.level("p:1") == 10 * DEPTH - n
    assert b.inflight("if:s1") == 0


def test_negative_control_without_the_lock_the_books_do_not_balance(switch_often):
    b = widen(MemoryBackend())
    b._lock = contextlib.nullcontext()  # type: ignore[assignment]
    n = hammer(b)
    assert b.level("b:s1") != DEPTH - n or b.level("p:1") != 10 * DEPTH - n or b.inflight("if:s1") != 0
