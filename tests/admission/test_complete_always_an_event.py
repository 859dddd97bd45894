"""A complete always produces its event (docs/contract.md), also when the store restarted without
its data and the scope is no longer entitled, so the signed id has nothing to settle against."""

from __future__ import annotations

import time

import pytest

from admission import backends, events, params
from admission.backends.memory import MemoryBackend
from entitlements.services import entitlement_revoke
from tests.admission.world import body, build_world

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"


@pytest.mark.usefixtures("memory_store")
def test_a_forgotten_reservation_of_a_revoked_scope_still_leaves_its_complete_event(fleet, sink):
    w = build_world(fleet)
    got = w.gateway.post(RESERVE, body("acme", "reserved", "gone-1", prompt=20, out=20), format="json").json()
    backends.set_backend(MemoryBackend())  # a restart without its data (memory_store puts the old one back)
    entitlement_revoke(actor=fleet.operator, reason="test", entitlement=w.lender)
    params.invalidate()
    done = w.gateway.post(COMPLETE, {"reservation_id": got["reservation_id"], "prompt_tokens": 20,
                                     "output_tokens": 5, "status": "ok"}, format="json")  # fmt: skip
    assert done.status_code == 404
    events.buffer().flush()
    (ev,) = [e for e in sink.events if e["event_id"] == "gone-1:complete"]
    assert (ev["status"], ev["tenant"], ev["output_tokens"], ev["actual_wt"]) == ("ok", "acme", 5, 25.0)


@pytest.mark.redis
def test_a_redis_restarted_without_data_still_leaves_every_complete_event(fleet, sink, tmp_path, settings):
    """The issue's case on a real redis-server: SIGKILLed and started empty (no AOF). A reservation
    whose scope is still entitled settles from its signed id (200); one whose entitlement went
    since is a 404, and both leave their complete event."""
    from admission.backends.redis import RedisBackend
    from tests.servers.redis import RedisServer

    server = RedisServer(tmp_path)
    server.start()
    prev = backends.set_backend(RedisBackend(server.url, socket_timeout=0.5, probe_every_s=0.05))
    params.invalidate()
    try:
        w = build_world(fleet)
        kept = w.gateway.post(RESERVE, body("acme", "reserved", "kept-1", prompt=20, out=20), format="json").json()
        gone = w.gateway.post(RESERVE, body("globex", "best_effort", "gone-2", prompt=20, out=20), format="json").json()
        assert kept["decision"] == gone["decision"] == "admit"
        server.kill()
        server.start()  # the same port, nothing in it
        assert server.client().dbsize() == 0
        entitlement_revoke(actor=fleet.operator, reason="test", entitlement=w.borrower)
        params.invalidate()

        def complete(reservation: dict) -> int:
            done = {"reservation_id": reservation["reservation_id"], "prompt_tokens": 20, "output_tokens": 5,
                    "status": "ok"}  # fmt: skip
            for _ in range(200):  # the breaker reopens on its next probe; a hang guard, not a timing check
                status = w.gateway.post(COMPLETE, done, format="json").status_code
                if status != 503:
                    return status
                time.sleep(0.05)
            return status

        assert (complete(kept), complete(gone)) == (200, 404)
        events.buffer().flush()
        completes = {e["event_id"]: e for e in sink.events if e["decision"] == "complete"}
        assert set(completes) == {"kept-1:complete", "gone-2:complete"}
        assert (completes["gone-2:complete"]["tenant"], completes["gone-2:complete"]["output_tokens"]) == ("globex", 5)
    finally:
        backends.set_backend(prev)
        params.invalidate()
        server.stop()
