"""Sweep S10 (issue 38): an event time further ahead than TELEMETRY_TS_MAX_AHEAD_S is refused naming
`ts`, and the good event beside it still lands."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from telemetry.models import AdmissionEvent
from telemetry.services import ingest_events


def _ev(eid: str, ts: datetime) -> dict:
    return {"event_id": eid, "ts": ts.isoformat(), "tenant": "acme", "model": "llama-test", "region": "us-test",
            "traffic_class": "reserved", "decision": "admit", "estimated_wt": 100, "prompt_tokens": 10}  # fmt: skip


@pytest.mark.django_db
def test_an_event_too_far_ahead_is_a_ts_error_and_its_neighbour_lands(fleet, settings):
    settings.TELEMETRY_TS_MAX_AHEAD_S = 300
    now = datetime.now(UTC)
    got = ingest_events(source="gw", events=[_ev("ahead", now + timedelta(seconds=900)), _ev("ok", now)])
    assert got.accepted == 1
    assert len(got.errors) == 1 and "ts" in str(got.errors[0])
    assert list(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["ok"]
