"""A complete always produces its event (docs/contract.md), also when the store restarted without
its data and the scope is no longer entitled, so the signed id has nothing to settle against."""

from __future__ import annotations

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
