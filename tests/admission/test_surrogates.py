"""A lone UTF-16 surrogate ("\\ud800", valid JSON, no UTF-8 for it) on the serving path and in its event
pipeline: the reserve and complete refuse it naming the field, and an event carrying one never stalls
the buffer or costs its batch (the good events land, the bad one is dead-lettered where an operator sees
it). The `postgres` tests run where jsonb and the COPY refuse the string."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from admission import events, sinks, tasks
from http_plumbing.api_guards import SURROGATE_MESSAGE
from telemetry import columns, validation
from telemetry.models import AdmissionEvent, DeadLetter
from tests.admission.world import body, build_world
from tests.telemetry.helpers import event

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"
LONE = "\ud800"


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


def _raw(client, url, b):
    return client.post(url, data=json.dumps(b), content_type="application/json")  # ensure_ascii keeps "\\ud800"


@pytest.mark.parametrize("field", ["request_id", "tenant", "project", "model", "region"])
def test_a_reserve_with_a_lone_surrogate_is_a_400_naming_the_field(w, sink, field):
    assert _raw(w.gateway, RESERVE, body("acme", "reserved", "warm")).status_code == 200  # the token is cached now
    for _ in range(2):  # the first through DRF, the second through the gateway fast path
        r = _raw(w.gateway, RESERVE, {**body("acme", "reserved", "r-1"), field: f"x{LONE}"})
        assert r.status_code == 400, r.content
        assert r.json()["error"]["fields"] == {field: [SURROGATE_MESSAGE]}
    events.buffer().flush()
    assert [e["event_id"] for e in sink.events] == ["warm"]  # nothing of the refused requests


def test_a_complete_with_a_lone_surrogate_is_a_400_naming_the_field(w):
    r = _raw(w.gateway, COMPLETE, {"reservation_id": f"r1.{LONE}", "prompt_tokens": 1, "output_tokens": 1,
                                   "status": "ok"})  # fmt: skip
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"reservation_id": [SURROGATE_MESSAGE]}


def _batch():
    now = timezone.now().isoformat()
    return [event(0, ts=now), event(1, ts=now, tenant=f"ac{LONE}me"), event(2, ts=now)]


@pytest.mark.postgres
def test_the_buffer_is_not_stuck_behind_a_bad_event(fleet):
    buf = events.EventBuffer(sinks.ingest, dead_letter=sinks.dead_letter_batch, autostart=False, max_attempts=1)
    for e in _batch():
        buf.emit(e)
    buf.flush()
    assert buf.pending() == 0
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r0", "r2"]
    (row,) = DeadLetter.objects.filter(stage=sinks.STAGE)
    assert [e["tenant"] for e in row.payload["events"]] == ["ac\\ud800me"]
    assert row.payload["errors"] == [{"index": 1, "field": "tenant", "message": SURROGATE_MESSAGE}]
    buf.emit(event(3, ts=timezone.now().isoformat()))
    assert buf.flush() == 1 and AdmissionEvent.objects.count() == 3


@pytest.mark.postgres
def test_in_broker_mode_the_bad_event_is_dead_lettered_and_the_good_ones_ingested(fleet):
    tasks.ingest_events_batch.apply(args=[_batch()]).get()  # the worker's task body, run here
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r0", "r2"]
    assert DeadLetter.objects.filter(stage=sinks.STAGE).count() == 1


@pytest.mark.postgres
def test_an_event_that_fails_ingest_itself_is_isolated_and_the_rest_lands(fleet, monkeypatch):
    """A validator gap (yesterday's control-character rule, blind to surrogates) lets the event reach the
    database, which raises for the whole batch: the sink splits until the event is alone."""
    old = re.compile(r"[\x00-\x1f\x7f-\x9f]")
    monkeypatch.setattr(validation, "CONTROL", old)
    monkeypatch.setattr(columns, "CONTROL", old)
    result = sinks.ingest(_batch())
    assert result.accepted == 2
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r0", "r2"]
    (row,) = DeadLetter.objects.filter(stage=sinks.STAGE)
    assert row.payload == [{**_batch()[1], "tenant": "ac\\ud800me", "ts": row.payload[0]["ts"]}]
    assert row.error.startswith("UnicodeEncodeError")
