"""`complete` charges at most the envelope's max prompt (issue 29): one tenant's report of 10^9
prompt tokens must not drive the pool bucket to -depth and throttle another tenant's best_effort."""

from __future__ import annotations

from admission import events
from tests.admission.world import body, build_world

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"


def test_a_huge_prompt_report_is_capped_and_does_not_throttle_another_tenant(fleet, store, sink):
    w = build_world(fleet)
    got = w.gateway.post(RESERVE, body("acme", "reserved", "big-1", prompt=200, out=200), format="json").json()
    done = w.gateway.post(COMPLETE, {"reservation_id": got["reservation_id"], "prompt_tokens": 1_000_000_000,
                                     "output_tokens": 10, "status": "ok"}, format="json").json()  # fmt: skip
    other = w.gateway.post(RESERVE, body("globex", "best_effort", "other-1", prompt=20, out=20), format="json")
    assert (other.status_code, other.json().get("source")) == (200, "entitlement")  # uncapped: 429 RECLAIMED
    cap = w.lender.max_prompt_tokens
    assert (done["prompt_cap"], done["actual_wt"]) == (cap, cap + 4 * 10)
    events.buffer().flush()
    (ev,) = [e for e in sink.events if e["event_id"] == "big-1:complete"]
    assert (ev["prompt_tokens"], ev["prompt_capped"], ev["reported_prompt_tokens"]) == (cap, True, 1_000_000_000)
