"""Issue 12.2: threads borrow Redis connections from a bounded set and give them back.

Under a thread-per-request server each request runs on a new thread; a connection kept per
thread was never returned, and after ~100 requests every reserve failed (MaxConnectionsError).
"""

from __future__ import annotations

import threading
import uuid

import pytest

from admission.backends.base import StoreUnavailable
from admission.backends.connections import BoundedConnections, Exhausted
from admission.backends.redis import RedisBackend
from tests.admission.test_backend_contract import op, prefixed
from tests.servers.redis import RedisServer


@pytest.fixture
def server(tmp_path):
    s = RedisServer(tmp_path)
    s.start()
    yield s
    s.stop()


def _clients(server) -> int:
    return int(server.client().info("clients")["connected_clients"]) - 1  # minus the one asking


@pytest.mark.redis
def test_a_thousand_requests_from_short_lived_threads_share_a_bounded_set(server):
    backend = RedisBackend(server.url, pool_size=8, socket_timeout=2.0)
    errors: list[BaseException] = []
    admitted = []

    def one() -> None:
        try:
            a = backend.reserve(prefixed(backend, op(cost=1.0, own=(0.0, 10_000.0), maxc=10_000, req=uuid.uuid4().hex)))
            admitted.append(a.admitted)
        except BaseException as exc:  # noqa: BLE001 - any failure of a request is the finding
            errors.append(exc)

    for _ in range(50):  # 50 waves of 20 threads, each thread serves one request and ends
        wave = [threading.Thread(target=one) for _ in range(20)]
        for t in wave:
            t.start()
        for t in wave:
            t.join()
    assert errors == []
    assert admitted == [True] * 1000
    assert backend.connections.made <= 8
    assert _clients(server) <= 8 + 1  # the bounded set, and the general client's one connection


def test_a_saturated_set_waits_then_says_so_and_never_makes_more():
    made = []
    conns = BoundedConnections(lambda: made.append(object()) or made[-1], size=2, wait_s=0.05)
    a, b = conns.acquire(), conns.acquire()
    with pytest.raises(Exhausted):
        conns.acquire()
    conns.release(a)
    assert conns.acquire() is a  # the idle one is reused, not a new one made
    conns.release(b)
    assert len(made) == 2


@pytest.mark.redis
def test_exhaustion_is_store_unavailable_but_does_not_open_the_breaker(server):
    backend = RedisBackend(server.url, pool_size=1, socket_timeout=0.1)
    held = backend.connections.acquire()
    try:
        for _ in range(6):
            with pytest.raises(StoreUnavailable):
                backend.reserve(prefixed(backend, op()))
        assert not backend.breaker.is_open
    finally:
        backend.connections.release(held)
    assert backend.reserve(prefixed(backend, op())).admitted
