"""Ingest and usage endpoints: roles, 200-with-errors vs 400, tenant isolation (404)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from entitlements.services import entitlement_grant
from telemetry.models import AdmissionEvent, FleetSample
from telemetry.selectors import latest_pool_health
from telemetry.services import ingest_events
from tests.factories import grant_kwargs
from tests.telemetry.helpers import T0, client_for, event, person


def _post(client, url, body):
    return client.post(url, body, content_type="application/json")


def test_gateway_ingests_and_gets_errors_by_index(fleet):
    gw = client_for(person("gw", platform="gateway"))
    body = {"source": "gw-1", "events": [event(0), event(1, tenant="ghost")]}
    r = _post(gw, "/api/v1/telemetry/events", body)
    assert r.status_code == 200
    assert r.json() == {
        "accepted": 1,
        "duplicates": 0,
        "errors": [{"index": 1, "field": "tenant", "message": "unknown tenant 'ghost'"}],
    }
    again = _post(gw, "/api/v1/telemetry/events", body)
    assert again.status_code == 200
    assert again.json()["accepted"] == 0 and again.json()["duplicates"] == 1
    assert list(AdmissionEvent.objects.values_list("source", "event_id")) == [("gw-1", "r0")]


def test_odd_json_values_are_named_not_a_server_error(fleet):
    gw = client_for(person("gw", platform="gateway"))
    events = [
        event(0, decision=["admit"]),
        event(1, decision="throttle", reason={"code": 1}),
        event(2, status=[]),
        event(3, estimated_wt=2e12),  # past its range (an int past 64 bits is the JSON guard's: tests/api)
        event(4),
    ]
    r = _post(gw, "/api/v1/telemetry/events", {"source": "gw", "events": events})
    assert r.status_code == 200
    assert [(e["index"], e["field"]) for e in r.json()["errors"]] == [
        (0, "decision"),
        (1, "reason"),
        (2, "status"),
        (3, "estimated_wt"),
    ]
    assert r.json()["accepted"] == 1


def test_all_bad_is_400(fleet):
    gw = client_for(person("gw", platform="gateway"))
    r = _post(gw, "/api/v1/telemetry/events", {"source": "gw", "events": [event(0, decision="x")]})
    assert r.status_code == 400
    assert r.json()["errors"] == [
        {"index": 0, "field": "decision", "message": "must be one of admit, throttle, complete"}
    ]
    assert AdmissionEvent.objects.count() == 0


def test_missing_events_is_400_naming_the_field(fleet):
    gw = client_for(person("gw", platform="gateway"))
    r = _post(gw, "/api/v1/telemetry/events", {"source": "gw"})
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"events": ["required, a list"]}


def test_only_gateways_ingest(fleet):
    for user in (fleet.operator, person("viewer", tenant=fleet.acme)):
        c = client_for(user)
        assert _post(c, "/api/v1/telemetry/events", {"source": "x", "events": [event(0)]}).status_code == 403
        assert _post(c, "/api/v1/telemetry/fleet", {"pool": "pool-a", "ts": T0.isoformat()}).status_code == 403
    assert AdmissionEvent.objects.count() == 0
    assert FleetSample.objects.count() == 0


def test_fleet_sample_then_pool_health(fleet):
    gw = client_for(person("gw", platform="gateway"))
    sample = {
        "pool": "pool-a",
        "ts": T0.isoformat(),
        "replicas_healthy": 3,
        "replicas_total": 4,
        "accelerator_util": 0.5,
        "kv_cache_usage": 0.25,
        "requests_running": 12,
        "requests_waiting": 2,
    }
    later = dict(sample, ts=(T0 + timedelta(seconds=30)).isoformat(), replicas_healthy=2)
    assert _post(gw, "/api/v1/telemetry/fleet", sample).json() == {"accepted": 1, "duplicates": 0, "errors": []}
    assert _post(gw, "/api/v1/telemetry/fleet", [later, sample]).status_code == 200
    assert FleetSample.objects.count() == 2
    assert latest_pool_health(fleet.pool_a.pk) == (2, 4)
    assert latest_pool_health(fleet.pool_b.pk) is None
    bad = _post(gw, "/api/v1/telemetry/fleet", dict(sample, replicas_healthy=5))
    assert bad.status_code == 400
    assert bad.json()["errors"] == [{"index": 0, "field": "replicas_healthy", "message": "more than replicas_total"}]


def _usage(client, **params):
    base = {"start": T0.isoformat(), "end": (T0 + timedelta(hours=1)).isoformat()}
    base.update(params)
    return client.get("/api/v1/usage", base)


def test_usage_series_for_own_tenant(fleet):
    entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=T0 - timedelta(days=1)),
        actor=fleet.operator,
        reason="test",
    )
    ingest_events(
        source="admission",
        events=[
            event(0),
            event(1),
            event(2, decision="throttle", reason="QUOTA_EXCEEDED"),
            event(3, decision="throttle", reason="PLATFORM_CAPACITY", estimated_wt=60),
            event(4, event_id="r0:complete", decision="complete", actual_wt=150, output_tokens=5),
            event(5, tenant="globex"),
        ],
    )
    viewer = client_for(person("viewer", tenant=fleet.acme))
    r = _usage(viewer)
    assert r.status_code == 200
    body = r.json()
    assert (body["level"], body["step_s"], len(body["t"])) == ("minute", 60, 60)
    s = body["series"]
    assert s["entitled_wt_per_s"][0] == 2000.0  # 2 CU × R 1000
    assert s["arrived_requests"][0] == 4
    assert s["admitted_wt_per_s"][0] == round(200 / 60, 6)
    assert s["throttled_requests"] == {"PLATFORM_CAPACITY": [1] + [0] * 59, "QUOTA_EXCEEDED": [1] + [0] * 59}
    assert s["actual_wt"][0] == 150.0 and s["estimated_wt"][0] == 200.0
    assert body["responsible"] == {"PLATFORM_CAPACITY": "platform", "QUOTA_EXCEEDED": "tenant"}


def test_usage_other_tenant_is_404_and_staff_reads_any(fleet):
    ingest_events(source="admission", events=[event(0, tenant="globex")])
    viewer = client_for(person("viewer", tenant=fleet.acme))
    assert _usage(viewer, tenant="globex").status_code == 404
    assert _usage(viewer, tenant="no-such").status_code == 404
    approver = client_for(person("appr", platform="approver"))
    r = _usage(approver, tenant="globex")
    assert r.status_code == 200 and r.json()["series"]["arrived_requests"][0] == 1
    assert _usage(approver, tenant="no-such").status_code == 404
    gw = client_for(person("gw", platform="gateway"))
    assert _usage(gw).status_code == 403


def test_usage_picks_coarse_levels_for_long_ranges(fleet):
    approver = client_for(person("appr", platform="approver"))
    day = _usage(approver, end=(T0 + timedelta(days=2)).isoformat()).json()
    quarter = _usage(approver, end=(T0 + timedelta(days=90)).isoformat()).json()
    assert (day["level"], day["step_s"], len(day["t"])) == ("hour", 3600, 48)
    # the start (12:00) floors to midnight, so the last, partial day is a 91st point
    assert (quarter["level"], quarter["step_s"], len(quarter["t"])) == ("day", 86400, 91)
    assert quarter["start"] == T0.replace(hour=0).isoformat()
    assert _usage(approver, end=T0.isoformat()).status_code == 400


def test_usage_latency_percentiles_merge_across_minutes(fleet):
    done = [
        event(
            i, event_id=f"r{i}:complete", decision="complete", actual_wt=1, ttft_ms=100 if i < 98 else 9000, e2e_ms=1000
        )
        for i in range(100)
    ]
    ingest_events(source="admission", events=done)  # spread over 100 s: two minute buckets, one hour
    approver = client_for(person("appr", platform="approver"))
    r = _usage(approver, end=(T0 + timedelta(hours=12)).isoformat())
    s = r.json()["series"]
    assert r.json()["level"] == "hour"
    assert 100.0 <= s["ttft_p50_ms"][0] <= 158.5  # inside the bin of 100 ms: [100, 158.5)
    assert 6309.5 <= s["ttft_p99_ms"][0] <= 10000.0  # rank 99 of 100 is a slow one: [6309.6, 10000)
    assert 1000.0 <= s["e2e_p50_ms"][0] < s["e2e_p99_ms"][0] <= 1584.9  # one bin, interpolated inside it
    assert s["ttft_p50_ms"][1] is None
