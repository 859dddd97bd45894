"""Store down: reserved and shared fail open (recorded as such), best_effort fails closed.

Runs against a redis-server of its own, stopped mid-test and restarted.
"""

from __future__ import annotations

import pytest

from admission import backends, events, params
from admission.backends.redis import RedisBackend
from tests.admission.world import body, build_world, grant
from tests.servers.redis import RedisServer

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"


@pytest.fixture
def server(tmp_path):
    s = RedisServer(tmp_path)
    s.start()
    yield s
    s.stop()


@pytest.mark.redis
def test_fail_open_for_guaranteed_classes_fail_closed_for_best_effort(fleet, sink, server):
    prev = backends.set_backend(RedisBackend(server.url, socket_timeout=0.05))
    params.invalidate()
    try:
        w = build_world(fleet)
        grant(fleet, w.pool, fleet.globex, "0.01", "shared")

        def post(b, url=RESERVE):
            return w.gateway.post(url, b, format="json")

        up = post(body("acme", "reserved", "up-1")).json()
        assert up["source"] == "entitlement"

        server.stop()
        down = {cls: post(body(t, cls, f"down-{cls}", prompt=20, out=20)) for t, cls in
                [("acme", "reserved"), ("globex", "shared"), ("globex", "best_effort")]}  # fmt: skip
        assert [down[c].json()["source"] for c in ("reserved", "shared")] == ["fail_open", "fail_open"]
        assert down["best_effort"].status_code == 429
        assert down["best_effort"].json() == {
            "decision": "throttle",
            "reason": "ADMISSION_UNAVAILABLE",
            "responsible": "platform",
            "retry_after_s": 5,
        }
        fo = down["reserved"].json()["reservation_id"]
        # Signed and derived from the request: the same request while down gets the same id.
        assert fo.startswith("r1.") and post(body("acme", "reserved", "down-reserved", prompt=20, out=20)).json()[
            "reservation_id"] == fo  # fmt: skip
        done = post({"reservation_id": fo, "prompt_tokens": 20, "output_tokens": 10, "status": "ok"}, COMPLETE)
        assert (done.status_code, done.json()["source"]) == (200, "fail_open")
        unavailable = post({"reservation_id": up["reservation_id"], "prompt_tokens": 200, "output_tokens": 5,
                            "status": "ok"}, COMPLETE)  # fmt: skip
        assert (unavailable.status_code, unavailable.json()["error"]["code"]) == (503, "ADMISSION_UNAVAILABLE")

        server.start()  # empty again: scripts must be loaded anew (EVALSHA → NOSCRIPT → load)
        backends.get_backend().ping()  # the breaker opened while it was down: a health probe closes it
        again = post(body("acme", "reserved", "up-2"))
        assert (again.status_code, again.json()["source"]) == (200, "entitlement")
        assert post(body("globex", "best_effort", "up-3", prompt=20, out=20)).status_code == 200
        # The restarted store forgot up-1 (no AOF here): its complete still settles, from the signed id.
        late = post({"reservation_id": up["reservation_id"], "prompt_tokens": 200, "output_tokens": 5,
                     "status": "ok"}, COMPLETE)  # fmt: skip
        assert (late.status_code, late.json()["actual_wt"]) == (200, 220.0)
    finally:
        backends.set_backend(prev)
        params.invalidate()

    events.buffer().flush()
    seen = [(e["event_id"], e["decision"], e.get("source_kind") or e.get("reason")) for e in sink.events]
    assert seen == [
        ("up-1", "admit", "entitlement"),
        ("down-reserved", "admit", "fail_open"),
        ("down-shared", "admit", "fail_open"),
        ("down-best_effort", "throttle", "ADMISSION_UNAVAILABLE"),
        ("down-reserved", "admit", "fail_open"),  # its replay: the same event id, which telemetry keeps once
        ("down-reserved:complete", "complete", "fail_open"),
        ("up-1:complete", "complete", None),  # recorded while the store was down (503)
        ("up-2", "admit", "entitlement"),
        ("up-3", "admit", "entitlement"),
        ("up-1:complete", "complete", None),  # settled after the restart: the same event id, kept once
    ]
    done = {e["event_id"]: e for e in sink.of("complete")}
    # Every complete carries its real weighted tokens: 20 + 4 × 10 for the fail-open one.
    assert (done["down-reserved:complete"]["actual_wt"], done["up-1:complete"]["actual_wt"]) == (60.0, 220.0)
