"""Poison events: implausible timestamps and control characters are bad events named by index and
field; the good events of the batch are kept and ingest keeps working afterwards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from telemetry.models import AdmissionEvent, FleetSample, MinuteRollup
from telemetry.services import fleet_samples_ingest, ingest_events
from tests.telemetry.helpers import client_for, event, person

EVENTS, FLEET = "/api/v1/telemetry/events", "/api/v1/telemetry/fleet"


def _now_event(n: int, **kw):
    return event(n, **{"ts": timezone.now().isoformat(), **kw})


@pytest.mark.parametrize(
    "ts",
    [
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59-01:00",  # past the calendar once in UTC
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",  # before the calendar once in UTC
        "2026-01-05T12:00:00Z",
    ],
)
def test_timestamps_outside_the_calendar_or_far_away_are_bad_events(fleet, ts):
    result = ingest_events(source="gw", events=[_now_event(0), _now_event(1, ts=ts), _now_event(2)])
    assert [(e["index"], e["field"]) for e in result.errors] == [(1, "ts")]
    assert result.accepted == 2
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r0", "r2"]


def test_the_window_follows_the_settings(fleet, settings):
    now = timezone.now()
    settings.TELEMETRY_TS_MAX_AGE_S, settings.TELEMETRY_TS_MAX_AHEAD_S = 3600, 60
    events = [
        event(0, ts=(now - timedelta(seconds=3500)).isoformat()),
        event(1, ts=(now - timedelta(seconds=3700)).isoformat()),
        event(2, ts=(now + timedelta(seconds=30)).isoformat()),
        event(3, ts=(now + timedelta(seconds=120)).isoformat()),
    ]
    result = ingest_events(source="gw", events=events)
    assert [(e["index"], e["field"]) for e in result.errors] == [(1, "ts"), (3, "ts")]
    assert result.errors[0]["message"] == "outside the plausible window: at most 3600 s old and 60 s ahead"
    settings.TELEMETRY_TS_MAX_AGE_S = 7200
    assert ingest_events(source="gw", events=events).accepted == 1  # only event 1 is new and now in range


@pytest.mark.parametrize("field", ["event_id", "tenant", "project", "model", "region", "traffic_class", "entitlement"])
@pytest.mark.parametrize("bad", ["ac\x00me", "a\nb", "del\x7f", "c1\x85", "\t" + "0" * 31])
def test_control_characters_in_an_identifier_are_a_bad_event_naming_it(fleet, field, bad):
    result = ingest_events(source="gw", events=[_now_event(0), _now_event(1, **{field: bad}), _now_event(2)])
    assert result.errors == [{"index": 1, "field": field, "message": "must not contain control characters"}]
    assert result.accepted == 2


def test_a_nul_through_the_api_is_named_and_the_next_batch_lands(fleet):
    """On PostgreSQL a NUL in a catalogue lookup or a COPY fails the whole statement: it must not get there.

    It is that event's error, named by index and field; the batch's good events land (docs/contract.md §6).
    """
    gw = client_for(person("gw", platform="gateway"))
    batch = [
        _now_event(100),
        _now_event(101, tenant="ac\x00me"),
        _now_event(102, prompt_tokens=10**20),
        _now_event(103),
    ]
    r = gw.post(EVENTS, {"source": "gw", "events": batch}, content_type="application/json")
    body = r.json()
    assert [(e["index"], e["field"]) for e in body["errors"]] == [(1, "tenant"), (2, "prompt_tokens")]
    assert body["accepted"] == 2
    r = gw.post(EVENTS, {"source": "gw\x01", "events": [_now_event(1)]}, content_type="application/json")
    assert r.status_code == 400 and list(r.json()["error"]["fields"]) == ["source"]
    r = gw.post(EVENTS, {"source": "gw", "events": [_now_event(1, tenant="ac\x1bme")]}, content_type="application/json")
    assert r.json()["errors"] == [{"index": 0, "field": "tenant", "message": "must not contain control characters"}]
    r = gw.post(EVENTS, {"source": "gw", "events": [_now_event(i) for i in range(20)]}, content_type="application/json")
    assert r.json() == {"accepted": 20, "duplicates": 0, "errors": []}
    assert MinuteRollup.objects.filter(tenant="acme").count() >= 1


def test_fleet_samples_outside_the_window_or_with_a_nul_pool_are_named(fleet):
    now = timezone.now()
    samples = [
        {"pool": "pool-a", "ts": now.isoformat(), "replicas_healthy": 2, "replicas_total": 2},
        {"pool": "pool-a", "ts": datetime(9999, 12, 31, tzinfo=UTC).isoformat()},
        {"pool": "po\x00ol-a", "ts": now.isoformat()},
        {"pool": ["pool-a"], "ts": now.isoformat()},
    ]
    result = fleet_samples_ingest(source="gw", samples=samples)
    assert [(e["index"], e["field"]) for e in result.errors] == [(1, "ts"), (2, "pool"), (3, "pool")]
    assert result.accepted == 1
    assert FleetSample.objects.count() == 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("prompt_tokens", 2**63, "at most 1,000,000,000"),  # past a bigint: the COPY (or SQLite) would fail the batch
        ("output_tokens", 10**9 + 1, "at most 1,000,000,000"),
        ("estimated_wt", 1e308, "at most 1,000,000,000,000"),  # a rollup sum of two would be inf
        ("e2e_ms", 86_400_001, "at most 86,400,000"),
    ],
)
def test_numbers_beyond_their_range_are_bad_events(fleet, field, value, message):
    result = ingest_events(source="gw", events=[_now_event(0), _now_event(1, **{field: value})])
    assert result.errors == [{"index": 1, "field": field, "message": message}]
    assert result.accepted == 1
