"""The serving-path API (docs/contract.md §5) end to end on the in-process backend, one test per reason code."""

from __future__ import annotations

import pytest

from admission import events
from admission.models import PoolHealthOverride
from tests.admission.world import body, build_world, client_for, grant

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


def post(w, b, url=RESERVE):
    return w.gateway.post(url, b, format="json")


def test_admit_body_and_complete_settle(w, sink):
    r = post(w, body("acme", "reserved", "r-1", prompt=300, cached_prompt_tokens=100, out=None))
    assert r.status_code == 200
    d = r.json()
    # no max_output: envelope p95 output (800); w_cached 0 → 200 + 4 × 800
    assert (d["decision"], d["reserved_wt"], d["source"]) == ("admit", 3400.0, "entitlement")
    assert d["expires_at"].endswith("Z") and d["reservation_id"].startswith("r1.")
    c = post(
        w,
        {
            "reservation_id": d["reservation_id"],
            "prompt_tokens": 300,
            "cached_prompt_tokens": 100,
            "output_tokens": 100,
            "status": "ok",
            "ttft_ms": 150,
            "e2e_ms": 2000,
        },
        COMPLETE,
    )
    assert c.status_code == 200
    assert c.json() == {
        "reservation_id": d["reservation_id"],
        "status": "ok",
        "reserved_wt": 3400.0,
        "actual_wt": 600.0,
        "refunded_wt": 2800.0,
    }
    assert (
        post(
            w, {"reservation_id": d["reservation_id"], "prompt_tokens": 1, "output_tokens": 1, "status": "ok"}, COMPLETE
        ).json()
        == c.json()
    )
    events.buffer().flush()
    admit, done = sink.of("admit"), sink.of("complete")
    assert [(e["event_id"], e["source_kind"], e["estimated_wt"]) for e in admit] == [("r-1", "entitlement", 3400.0)]
    assert [(e["event_id"], e["status"], e["actual_wt"], e["slo_met"], e["output_tokens"]) for e in done] == [
        ("r-1:complete", "ok", 600.0, True, 100)
    ]
    assert done[0]["entitlement"] == str(w.lender.uuid)


def test_same_request_id_same_answer(w, sink):
    first = post(w, body("acme", "reserved", "dup"))
    again = post(w, body("acme", "reserved", "dup"))
    assert again.json() == first.json()
    events.buffer().flush()
    assert [e["event_id"] for e in sink.events] == ["dup"]


def test_bad_input_is_400_naming_the_field(w):
    for bad, field in [
        ({**body("acme", "reserved", "x"), "prompt_tokens": -1}, "prompt_tokens"),
        ({**body("acme", "reserved", "x"), "traffic_class": "gold"}, "traffic_class"),
        ({**body("acme", "reserved", "x"), "cached_prompt_tokens": 201}, "cached_prompt_tokens"),
        ({k: v for k, v in body("acme", "reserved", "x").items() if k != "request_id"}, "request_id"),
    ]:
        r = post(w, bad)
        assert (r.status_code, list(r.json()["error"]["fields"])) == (400, [field])
    r = post(w, {"reservation_id": "x", "prompt_tokens": 1, "output_tokens": 1, "status": "done"}, COMPLETE)
    assert (r.status_code, list(r.json()["error"]["fields"])) == (400, ["status"])


def test_only_gateways_reach_admission(w):
    op = client_for("op2", "operator")
    assert op.post(RESERVE, body("acme", "reserved", "x"), format="json").status_code == 403
    assert op.post(COMPLETE, {}, format="json").status_code == 403


def test_unknown_reservation_is_404(w):
    r = post(w, {"reservation_id": "nope", "prompt_tokens": 1, "output_tokens": 1, "status": "ok"}, COMPLETE)
    assert r.status_code == 404


def _throttled(r, reason, responsible, retry):
    assert r.status_code == 429
    expected = {"decision": "throttle", "reason": reason, "responsible": responsible, "retry_after_s": retry}
    if reason == "QUOTA_EXCEEDED":
        expected["limit"] = "rate"  # which limit: the token rate here, "rps" for the request rate (issue 23)
    assert r.json() == expected
    assert r.get("Retry-After") == (None if retry is None else str(retry))


def test_placement(w):
    _throttled(post(w, {**body("acme", "reserved", "p"), "region": "nowhere"}), "PLACEMENT", "platform", 300)


def test_not_entitled(w):
    _throttled(post(w, body("acme", "shared", "n")), "NOT_ENTITLED", "tenant", 300)
    _throttled(post(w, body("initech", "reserved", "n2")), "NOT_ENTITLED", "tenant", 300)


def test_outside_envelope_never_passes_so_it_advises_no_retry(w):
    for r in (post(w, body("acme", "reserved", "e1", prompt=8001)), post(w, body("acme", "reserved", "e2", out=2001))):
        _throttled(r, "OUTSIDE_ENVELOPE", "tenant", None)
    assert post(w, body("acme", "reserved", "e3", prompt=8000, out=None)).status_code == 200


def test_concurrency_limit(w, fleet):
    from tests.factories import TenantFactory

    grant(fleet, w.pool, TenantFactory(slug="initech"), "0.01", "shared", max_concurrency=2)
    ids = [post(w, body("initech", "shared", f"c{i}", prompt=10, out=10)).json() for i in range(2)]
    _throttled(post(w, body("initech", "shared", "c2", prompt=10, out=10)), "CONCURRENCY_LIMIT", "tenant", 1)
    post(
        w,
        {"reservation_id": ids[0]["reservation_id"], "prompt_tokens": 10, "output_tokens": 5, "status": "ok"},
        COMPLETE,
    )
    assert post(w, body("initech", "shared", "c3", prompt=10, out=10)).status_code == 200


def test_admit_events_carry_the_scopes_in_flight_count(w, fleet, sink):
    # the statement's concurrency peak (issue 17.1) is the largest of these, from the store's own count
    from tests.factories import TenantFactory

    grant(fleet, w.pool, TenantFactory(slug="initech"), "0.01", "shared", max_concurrency=3)
    first = post(w, body("initech", "shared", "f0", prompt=10, out=10)).json()
    post(w, body("initech", "shared", "f1", prompt=10, out=10))
    post(w, {"reservation_id": first["reservation_id"], "prompt_tokens": 10, "output_tokens": 5, "status": "ok"},
         COMPLETE)  # fmt: skip
    post(w, body("initech", "shared", "f2", prompt=10, out=10))
    events.buffer().flush()
    assert [(e["event_id"], e["in_flight"]) for e in sink.of("admit")] == [("f0", 1), ("f1", 2), ("f2", 2)]


def test_quota_exceeded_for_overage_throttle(w):
    for i in range(12):  # 12 × 1,000 wt empties the lender's 12,000 wt bucket
        assert post(w, body("acme", "reserved", f"q{i}")).status_code == 200
    # 1,000 wt short at 200 wt/s: 5 s
    _throttled(post(w, body("acme", "reserved", "q12")), "QUOTA_EXCEEDED", "tenant", 5)


def test_reclaimed_when_lender_uses_its_capacity(w):
    got = [post(w, body("globex", "best_effort", f"b{i}")).json()["source"] for i in range(4)]
    assert got == ["entitlement"] * 3 + ["borrowed"]  # pool 16,800 → 12,800
    for i in range(12):  # the lender takes its full 12,000: pool 800, below the 3,360 margin
        assert post(w, body("acme", "reserved", f"l{i}")).json()["source"] == "entitlement"
    _throttled(post(w, body("globex", "best_effort", "b4")), "RECLAIMED", "platform policy", 5)


def test_platform_capacity_when_degraded_and_health_api(w, fleet):
    op = client_for("op3", "operator")
    r = op.post(
        f"/api/v1/admission/pools/{w.pool.slug}/health", {"replicas_healthy": 1, "replicas_total": 4}, format="json"
    )
    assert (r.status_code, r.json()["replicas_healthy"]) == (200, 1)
    assert PoolHealthOverride.objects.get(pool=w.pool).ratio == 0.25
    # 70 wt/s < 250 sold: degraded; pool depth 4,200; reserved may take it to −12,000.
    for i in range(12):
        assert post(w, body("acme", "reserved", f"d{i}")).status_code == 200  # pool −7,800
    _throttled(post(w, body("globex", "best_effort", "s0")), "PLATFORM_CAPACITY", "platform", 10)
    assert w.gateway.post(f"/api/v1/admission/pools/{w.pool.slug}/health", {"replicas_healthy": 4,
                          "replicas_total": 4}, format="json").status_code == 403  # fmt: skip
    bad = op.post(
        f"/api/v1/admission/pools/{w.pool.slug}/health", {"replicas_healthy": 5, "replicas_total": 4}, format="json"
    )
    assert (bad.status_code, list(bad.json()["error"]["fields"])) == (400, ["replicas_healthy"])
    assert op.post("/api/v1/admission/pools/nope/health", {"replicas_healthy": 1, "replicas_total": 1},
                   format="json").status_code == 404  # fmt: skip
    assert op.delete(f"/api/v1/admission/pools/{w.pool.slug}/health").status_code == 204
    assert not PoolHealthOverride.objects.exists()


def test_every_decision_is_an_event(w, sink):
    post(w, body("acme", "reserved", "ev1"))
    post(w, body("acme", "reserved", "ev2", prompt=9000))
    post(w, {**body("acme", "reserved", "ev3"), "region": "nowhere"})
    events.buffer().flush()
    assert [(e["event_id"], e["decision"], e.get("reason")) for e in sink.events] == [
        ("ev1", "admit", None),
        ("ev2", "throttle", "OUTSIDE_ENVELOPE"),
        ("ev3", "throttle", "PLACEMENT"),
    ]


def test_a_warm_reserve_makes_no_database_query(w, settings, django_assert_num_queries):
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600  # between the snapshot's counter checks (one query per interval)
    assert post(w, body("acme", "reserved", "warm-1", prompt=10, out=10)).status_code == 200
    with django_assert_num_queries(0):  # token, roles and parameters all come from in-process caches
        assert post(w, body("acme", "reserved", "warm-2", prompt=10, out=10)).status_code == 200


def test_a_bad_token_is_refused_and_not_remembered(w):
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION="Token not-a-key")
    assert c.post(RESERVE, body("acme", "reserved", "bad"), format="json").status_code == 401
    assert c.post(RESERVE, body("acme", "reserved", "bad"), format="json").status_code == 401
