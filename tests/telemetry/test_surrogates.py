"""A lone UTF-16 surrogate ("\\ud800": a valid JSON escape with no UTF-8 for it) anywhere in telemetry's
input: a 400 or a bad event naming the field, never a 500, and the quarantine that keeps it never fails.

On PostgreSQL (the `postgres` tests) the COPY, a catalogue query or jsonb would refuse the string: the
refusal must come first, from the validators.
"""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from http_plumbing.api_guards import SURROGATE_MESSAGE
from telemetry.deadletter import dead_letter
from telemetry.models import AdmissionEvent, DeadLetter, PoolAlert
from telemetry.services import ingest_events
from tests.telemetry.helpers import client_for, event, person
from tests.telemetry.test_alertmanager import alert, hook

EVENTS, ALERTS = "/api/v1/telemetry/events", "/api/v1/telemetry/alertmanager"
LONE = "\ud800"


def _now(n, **kw):
    return event(n, **{"ts": timezone.now().isoformat(), **kw})


def _raw(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")  # ensure_ascii: "\\ud800"


@pytest.mark.postgres
@pytest.mark.parametrize("field", ["event_id", "tenant", "project", "model", "region", "traffic_class", "entitlement"])
def test_a_lone_surrogate_in_an_identifier_is_that_events_error(fleet, field):
    result = ingest_events(source="gw", events=[_now(0), _now(1, **{field: f"ac{LONE}me"}), _now(2)])
    assert result.errors == [{"index": 1, "field": field, "message": SURROGATE_MESSAGE}]
    assert result.accepted == 2
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r0", "r2"]


@pytest.mark.postgres
def test_through_the_api_the_source_is_a_400_and_an_event_is_named_by_index(fleet):
    gw = client_for(person("gw", platform="gateway"))
    r = _raw(gw, EVENTS, {"source": f"g{LONE}w", "events": [_now(0)]})
    assert r.status_code == 400 and list(r.json()["error"]["fields"]) == ["source"]
    r = _raw(gw, EVENTS, {"source": "gw", "events": [_now(0), _now(1, tenant=LONE), _now(2, source_kind=LONE)]})
    assert r.status_code == 200
    assert [(e["index"], e["field"]) for e in r.json()["errors"]] == [(1, "tenant"), (2, "source_kind")]
    assert r.json()["accepted"] == 1


def test_a_valid_surrogate_pair_is_one_character_and_passes(fleet):
    gw = client_for(person("gw", platform="gateway"))
    r = gw.post(EVENTS, data='{"source": "gw\\ud83d\\ude00", "events": []}', content_type="application/json")
    assert r.status_code == 200, r.content


@pytest.mark.postgres
def test_the_dead_letter_stores_a_lone_surrogate_anywhere_as_visible_text(db):
    payload = [{"tenant": f"ac{LONE}me", f"k{LONE}": [LONE, "\x00"]}]
    row = dead_letter(stage=f"s{LONE}", key=f"r{LONE}+0", payload=payload, error=f"UnicodeEncodeError {LONE}")
    row = DeadLetter.objects.get(pk=row.pk)  # read back from jsonb
    assert row.payload == [{"tenant": "ac\\ud800me", "k\\ud800": ["\\ud800", "\\u0000"]}]
    assert (row.stage, row.key, row.error) == ("s\\ud800", "r\\ud800+0", "UnicodeEncodeError \\ud800")


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"labels": {"alertname": "X", "pool": f"pool{LONE}"}}, "labels.pool"),
        ({"labels": {"alertname": "X", f"po{LONE}ol": "pool-a"}}, "labels"),
        ({"fingerprint": f"f{LONE}"}, "fingerprint"),
        ({"annotations": {"summary": LONE}}, "annotations.summary"),
        ({"generatorURL": f"http://x/{LONE}"}, "generatorURL"),
    ],
)
def test_a_lone_surrogate_in_an_alert_is_that_alerts_error(fleet, bad, field):
    gw = client_for(person("gw", platform="gateway"))
    r = _raw(gw, ALERTS, hook(alert(fp="good"), alert(fp="bad", **bad)))
    assert r.status_code == 200, r.content
    assert r.json()["errors"] == [{"index": 1, "field": field, "message": SURROGATE_MESSAGE}]
    assert list(PoolAlert.objects.values_list("fingerprint", flat=True)) == ["good"]
    r = _raw(gw, ALERTS, {**hook(alert()), "receiver": LONE})
    assert r.status_code == 400 and r.json() == {"receiver": [SURROGATE_MESSAGE]}
