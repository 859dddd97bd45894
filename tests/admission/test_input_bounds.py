"""Bad input is a 400 naming the field; an oversized complete is charged at the envelope's max output."""

from __future__ import annotations

import pytest

from admission import events, keys
from tests.admission.world import body, build_world

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


@pytest.mark.parametrize("field", ["request_id", "tenant", "project", "model", "region"])
@pytest.mark.parametrize("bad", ["ac\u0000me", "a\nb", "tab\there", "del\x7f", "c1\x85"])
def test_control_characters_in_a_reserve_identifier_are_a_400_naming_it(w, sink, field, bad):
    r = w.gateway.post(RESERVE, {**body("acme", "reserved", "ok-id"), field: bad}, format="json")
    assert r.status_code == 400
    assert field in str(r.json())
    events.buffer().flush()
    assert sink.events == []  # refused before it could become an event


@pytest.mark.parametrize("bad", ["r\u0000", "x\x1b[0m"])
def test_control_characters_in_a_reservation_id_are_a_400_naming_it(w, bad):
    r = w.gateway.post(COMPLETE, {"reservation_id": bad, "prompt_tokens": 1, "output_tokens": 1, "status": "ok"},
                       format="json")  # fmt: skip
    assert r.status_code == 400 and "reservation_id" in str(r.json())


def test_request_ids_up_to_128_characters_keep_every_event_and_longer_ones_are_a_400(w, sink):

    longest = "r" * 128
    d = w.gateway.post(RESERVE, body("acme", "reserved", longest), format="json").json()
    done = {"reservation_id": d["reservation_id"], "prompt_tokens": 200, "output_tokens": 10, "status": "ok"}
    assert w.gateway.post(COMPLETE, done, format="json").status_code == 200
    events.buffer().flush()
    ids = [e["event_id"] for e in sink.events]
    assert ids == [longest, longest + ":complete"]
    assert all(len(i) <= 160 for i in ids)  # the event column's width: nothing is dropped at ingest
    for n in (129, 161, 200):
        r = w.gateway.post(RESERVE, body("acme", "reserved", "r" * n), format="json")
        assert r.status_code == 400 and "request_id" in str(r.json())


@pytest.mark.parametrize("field,value", [("prompt_tokens", 10**9 + 1), ("max_output_tokens", 2**64),
                                         ("cached_prompt_tokens", -1)])  # fmt: skip
def test_token_counts_out_of_range_are_a_400_naming_the_field(w, field, value):
    r = w.gateway.post(RESERVE, {**body("acme", "reserved", "big"), field: value}, format="json")
    assert r.status_code == 400 and field in str(r.json())


def test_an_oversized_complete_is_charged_at_the_envelope_max_and_the_event_says_so(w, sink, memory_store):
    d = w.gateway.post(RESERVE, body("acme", "reserved", "huge"), format="json").json()
    done = {"reservation_id": d["reservation_id"], "prompt_tokens": 200, "output_tokens": 10**9, "status": "ok"}
    r = w.gateway.post(COMPLETE, done, format="json").json()
    # envelope max output 2,000: actual = 200 + 4 × 2,000
    assert (r["actual_wt"], r["output_cap"]) == (8200.0, 2000)
    events.buffer().flush()
    (ev,) = sink.of("complete")
    assert (ev["output_tokens"], ev["output_capped"], ev["reported_output_tokens"], ev["actual_wt"]) == (
        2000, True, 10**9, 8200.0,
    )  # fmt: skip
    # The lender's bucket (depth 12,000, 200 wt/s) lost 8,200 plus at most a second's refill, not 4 × 10⁹.
    assert (
        3800.0
        <= memory_store.level(keys.own(keys.tag("adm:", w.pool.pk), "acme::llama-test:tiny-region:reserved"))
        <= 4000.0
    )
