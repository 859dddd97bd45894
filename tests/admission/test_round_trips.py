"""The HTTP serving path's Redis round trips (issue 35.1): a warm reserve and a warm complete each
make exactly one, the script call. The token-revocation epoch travels in that call (admission.auth):
no read through Django's cache, no GET of the epoch, no second trip of any kind.

Counted at the connection: every command any redis-py connection in this process sends (the
admission store's hot path, its general client, Django's Redis cache) passes through
`AbstractConnection.send_packed_command`, one call per round trip (a pipeline is one call)."""

from __future__ import annotations

import pytest
import redis.connection

from admission import backends, params
from tests.admission.conftest import redis_backend
from tests.admission.world import body, build_world

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"

pytestmark = pytest.mark.redis


@pytest.fixture
def trips(monkeypatch):
    """The command names of each round trip sent from here on (one list per send)."""
    sent: list[list[str]] = []
    real = redis.connection.AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        chunks = [command] if isinstance(command, bytes | str) else list(command)
        raw = b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in chunks)
        parts = raw.split(b"\r\n")
        # RESP arrays: '*n', '$len', NAME, ... ; a pipeline holds several arrays in one send
        sent.append([parts[i + 2].decode().upper() for i, p in enumerate(parts[:-2]) if p.startswith(b"*")])
        return real(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    return sent


@pytest.fixture
def w(fleet, sink, redis_url, settings):
    # Django's cache on the same Redis, so a token check read through it would be counted too
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}}
    b = redis_backend(redis_url)
    prev = backends.set_backend(b)
    params.invalidate()
    yield build_world(fleet)
    b.clear()
    backends.set_backend(prev)
    params.invalidate()


def test_a_warm_reserve_and_complete_make_one_round_trip_each(w, trips, settings):
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600  # between counter checks (those are database reads)
    gw = w.gateway
    # warm: the token verified and cached, the pool's tag listed for the sweep, the scripts loaded
    first = gw.post(RESERVE, body("acme", "reserved", "warm"), format="json")
    assert first.status_code == 200, first.content
    # ...and complete.lua loaded too (a throwaway redis-server starts with no scripts; alone, this test's
    # first complete would load it: SCRIPT LOAD + EVALSHA)
    warm_done = {
        "reservation_id": first.json()["reservation_id"],
        "prompt_tokens": 1,
        "output_tokens": 0,
        "status": "ok",
    }
    assert gw.post(COMPLETE, warm_done, format="json").status_code == 200
    trips.clear()
    got = gw.post(RESERVE, body("acme", "reserved", "one"), format="json")
    assert got.status_code == 200, got.content
    assert trips == [["EVALSHA"]]
    trips.clear()
    done = {"reservation_id": got.json()["reservation_id"], "prompt_tokens": 200, "output_tokens": 10, "status": "ok"}
    settled = gw.post(COMPLETE, done, format="json")
    assert settled.status_code == 200, settled.content
    assert trips == [["EVALSHA"]]


def test_a_revocation_is_seen_by_the_same_single_call(w, trips, settings):
    """The epoch moved (a token revoked elsewhere): the reserve's one call says so, the token is
    verified again on DRF's path (the database; a key this process verified before is not counted by
    the invalid-token throttle, so no cache call: http_plumbing.throttles), and the call is made again."""
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600
    gw = w.gateway
    assert gw.post(RESERVE, body("acme", "reserved", "warm"), format="json").status_code == 200
    backends.get_backend().bump_epoch()
    trips.clear()
    assert gw.post(RESERVE, body("acme", "reserved", "after"), format="json").status_code == 200
    assert trips == [["EVALSHA"], ["EVALSHA"]]
