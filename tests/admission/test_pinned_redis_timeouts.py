"""Issue 38: a Redis socket that timed out is never used again, so its late answer is never read as the
next call's. Redis is paused (CLIENT PAUSE) on a throwaway server so an answer really arrives late.

Mutation M3 removes the backend's own disconnect, M3b also reads with redis-py's disconnect off: the
behaviour below must hold whichever layer drops the socket (tests/mutations/catalogue.py says which is
caught).
"""

from __future__ import annotations

import pytest
import redis

from admission.backends.base import StoreUnavailable
from admission.backends.redis import RedisBackend
from tests.admission.test_backend_contract import op, prefixed
from tests.servers.redis import RedisServer


@pytest.fixture
def server(tmp_path):
    s = RedisServer(tmp_path)
    s.start()
    yield s
    s.stop()


@pytest.mark.redis
def test_an_answer_that_arrives_after_the_timeout_is_never_read_as_the_next_calls(server):
    # One connection, so a socket kept after its timeout would be the very one the next call borrows.
    backend = RedisBackend(server.url, prefix="pin:", socket_timeout=0.1, pool_size=1, breaker_threshold=100)
    assert backend.reserve(prefixed(backend, op(req="warm"))).admitted  # the script is loaded
    other = redis.Redis.from_url(server.url, socket_timeout=10)
    other.execute_command("CLIENT", "PAUSE", 500, "ALL")
    with pytest.raises(StoreUnavailable):
        backend.reserve(prefixed(backend, op(req="late")))  # every attempt times out, unanswered
    other.ping()  # blocks until the pause ends; a socket still open then gets "late"'s answers
    nxt = backend.reserve(prefixed(backend, op(req="next")))
    assert nxt.parts()[1] == "next"  # its own answer, not "late"'s
    assert backend.reserve(prefixed(backend, op(req="after"))).parts()[1] == "after"
