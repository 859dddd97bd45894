"""Signed, self-describing reservation ids (issue 12.3) and replays of settled requests (12.6)."""

from __future__ import annotations

import pytest

from admission import events, ids, keys, services
from admission.isotime import iso_utc
from tests.admission.world import body, build_world

SCOPE = "acme::llama-test:tiny-region:reserved"


@pytest.fixture
def w(fleet, store, sink):
    return build_world(fleet)


def reserve(b: dict) -> services.Decision:
    return services.reserve(services.parse_reserve(b))


def complete(rid: str, prompt: int = 200, output: int = 50, status: str = "ok"):
    return services.complete(services.parse_complete({"reservation_id": rid, "prompt_tokens": prompt,
                                                      "output_tokens": output, "status": status}))  # fmt: skip


def own_key(store, w) -> str:
    return keys.own(keys.tag(store.prefix, w.pool.pk), SCOPE)


def test_a_settled_request_replays_its_answer_with_settled_true_and_is_not_counted_again(w, store, sink):
    first = reserve(body("acme", "reserved", "once"))
    assert complete(first.body["reservation_id"])[0] == 200
    level = store.level(own_key(store, w))
    again = reserve(body("acme", "reserved", "once"))
    assert again.status == 200
    assert again.body == {**first.body, "settled": True}
    assert "settled" not in first.body
    assert store.level(own_key(store, w)) == level  # not charged again
    events.buffer().flush()
    assert [e["event_id"] for e in sink.of("admit")] == ["once"]  # not counted again


def test_the_id_names_its_request_scope_estimate_and_expiry(w):
    d = reserve(body("acme", "reserved", "self-describing"))
    c = ids.verify(d.body["reservation_id"])
    assert c is not None
    assert (c.tenant, c.request_id, c.scope, c.pool_id, float(c.estimate), c.source) == (
        "acme", "self-describing", ("acme", "", "llama-test", "tiny-region", "reserved"), w.pool.pk, 1000.0, "entitlement",
    )  # fmt: skip
    assert iso_utc(float(c.expires)) == d.body["expires_at"]


def test_a_tampered_or_foreign_id_is_404(w, settings):
    token = reserve(body("acme", "reserved", "t")).body["reservation_id"]
    head, payload, sig = token.split(".")
    forged = ids.Claims("acme", "t", ("acme", "", "llama-test", "tiny-region", "reserved"), w.pool.pk, "1.0", "0",
                        "fail_open")  # fmt: skip
    forged_payload = ids.sign(forged).split(".")[1]
    assert complete(f"{head}.{forged_payload}.{sig}")[0] == 404  # another payload under this signature
    assert complete("0123456789abcdef0123456789abcdef")[0] == 404  # an id of the old form
    settings.ADMISSION_SIGNING_KEY = "someone else's key"
    assert complete(token)[0] == 404


def test_a_rotated_key_accepts_ids_of_the_previous_one(w, settings, store):
    settings.ADMISSION_SIGNING_KEY = "key-1"
    token = reserve(body("acme", "reserved", "rot")).body["reservation_id"]
    settings.ADMISSION_SIGNING_KEY, settings.ADMISSION_SIGNING_KEYS_PREVIOUS = "key-2", ["key-1"]
    # A replay is answered under the new key; the old id still settles the same reservation.
    assert reserve(body("acme", "reserved", "rot")).body["reservation_id"] != token
    status, result = complete(token, prompt=200, output=0)
    assert (status, result["actual_wt"], result["refunded_wt"]) == (200, 200.0, 800.0)
    settings.ADMISSION_SIGNING_KEYS_PREVIOUS = []
    assert complete(token)[0] == 404


def test_a_store_that_forgot_the_reservation_still_settles_it_against_its_buckets(w, store, sink):
    d = reserve(body("acme", "reserved", "forgotten"))
    store.clear()  # as a Redis restarted without its data: the record and the debit are gone
    status, result = complete(d.body["reservation_id"], prompt=200, output=50)
    # actual 200 + 4 × 50 = 400, charged now to the scope's bucket (depth 12,000) and the pool's
    assert (status, result["actual_wt"]) == (200, 400.0)
    assert 11_600.0 <= store.level(own_key(store, w)) <= 11_700.0  # plus at most a moment's refill
    again = complete(d.body["reservation_id"], prompt=999, output=999)
    assert again == (200, result)  # idempotent: the first settlement stands
    assert 11_600.0 <= store.level(own_key(store, w)) <= 11_700.0
    assert reserve(body("acme", "reserved", "forgotten")).body == {**d.body, "settled": True}
    events.buffer().flush()
    done = sink.of("complete")
    assert [(e["event_id"], e["status"], e["actual_wt"], e["output_tokens"]) for e in done] == [
        ("forgotten:complete", "ok", 400.0, 50)
    ]


def test_a_forgotten_reservation_past_its_expiry_stands_as_expired(w, store, sink, settings):
    settings.ADMISSION_RESERVATION_TTL_S = 0.05
    d = reserve(body("acme", "reserved", "old"))
    store.clear()
    import time

    time.sleep(0.1)
    status, result = complete(d.body["reservation_id"])
    assert (status, result["status"], result["actual_wt"]) == (200, "expired", 1000.0)
    events.buffer().flush()
    assert [(e["event_id"], e["status"]) for e in sink.of("complete")] == [("old:complete", "expired")]


def test_fail_open_ids_are_the_same_in_every_process_and_their_complete_charges_the_actual(w, store, sink):
    sp = services.params.current().lookup("acme", "", "llama-test", "tiny-region", "reserved")
    req = services.parse_reserve(body("acme", "reserved", "fo-1", prompt=20, out=20))
    first = services._fail_mode(req, 100.0, {"entitlement": sp.entitlement}, sp)
    services.events.buffer().flush()
    assert services._fail_mode(req, 100.0, {"entitlement": sp.entitlement}, sp).body["reservation_id"] == first.body[
        "reservation_id"]  # fmt: skip
    status, result = complete(first.body["reservation_id"], prompt=20, output=10)
    # The store is up again: the fail-open admission was never debited, so its actual is charged now.
    assert (status, result["actual_wt"], result["source"]) == (200, 60.0, "fail_open")
    assert 11_940.0 <= store.level(own_key(store, w)) <= 12_000.0
