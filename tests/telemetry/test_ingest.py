"""Event ingest: validation by index and field, dedup on (source, event_id), rollups in step."""

from __future__ import annotations

import pytest

from telemetry.models import AdmissionEvent, DayRollup, HourRollup, MinuteRollup
from telemetry.services import ingest_events
from tests.telemetry.helpers import event


def test_replay_changes_nothing(fleet):
    events = [event(i) for i in range(5)] + [event(5, decision="throttle", reason="QUOTA_EXCEEDED")]
    first = ingest_events(source="admission", events=events)
    again = ingest_events(source="admission", events=events)
    assert (first.accepted, first.duplicates, first.errors) == (6, 0, [])
    assert (again.accepted, again.duplicates, again.errors) == (0, 6, [])
    assert AdmissionEvent.objects.count() == 6
    assert sorted(MinuteRollup.objects.values_list("decision", "reason", "requests", "estimated_wt")) == [
        ("admit", "", 5, 500.0),
        ("throttle", "QUOTA_EXCEEDED", 1, 100.0),
    ]
    assert sorted(HourRollup.objects.values_list("decision", "requests")) == [("admit", 5), ("throttle", 1)]
    assert sorted(DayRollup.objects.values_list("decision", "requests")) == [("admit", 5), ("throttle", 1)]


def test_same_event_id_from_another_source_is_another_event(fleet):
    ingest_events(source="gw-1", events=[event(1)])
    result = ingest_events(source="gw-2", events=[event(1)])
    assert (result.accepted, result.duplicates) == (1, 0)
    assert MinuteRollup.objects.get().requests == 2


def test_repeat_inside_one_batch_is_a_duplicate(fleet):
    result = ingest_events(source="admission", events=[event(1), event(1)])
    assert (result.accepted, result.duplicates) == (1, 1)
    assert MinuteRollup.objects.get().requests == 1


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"tenant": "nobody"}, "tenant"),
        ({"model": "gpt-none"}, "model"),
        ({"region": "mars"}, "region"),
        ({"traffic_class": "gold"}, "traffic_class"),
        ({"decision": "maybe"}, "decision"),
        ({"decision": "throttle"}, "reason"),
        ({"reason": "BECAUSE", "decision": "throttle"}, "reason"),
        ({"prompt_tokens": -1}, "prompt_tokens"),
        ({"output_tokens": -5}, "output_tokens"),
        ({"estimated_wt": "lots"}, "estimated_wt"),
        ({"ts": "2026-01-05T12:00:00"}, "ts"),
        ({"ts": "yesterday"}, "ts"),
        ({"event_id": ""}, "event_id"),
        ({"entitlement": "not-a-uuid"}, "entitlement"),
        ({"slo_met": "yes"}, "slo_met"),
        ({"project": "ghost"}, "project"),
    ],
)
def test_bad_event_is_reported_by_index_and_field_and_good_ones_kept(fleet, override, field):
    events = [event(0), event(1, **override), event(2)]
    result = ingest_events(source="admission", events=events)
    assert result.accepted == 2
    assert [(e["index"], e["field"]) for e in result.errors] == [(1, field)]
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r0", "r2"]
    assert MinuteRollup.objects.get().requests == 2


def test_complete_events_carry_actuals_and_latency_histograms(fleet):
    done = [
        event(
            i,
            event_id=f"r{i}:complete",
            decision="complete",
            actual_wt=90,
            output_tokens=20,
            ttft_ms=150,
            e2e_ms=2000,
            slo_met=i != 0,
            status="ok",
        )
        for i in range(4)
    ]
    assert ingest_events(source="admission", events=done).accepted == 4
    row = MinuteRollup.objects.get()
    assert (row.requests, row.actual_wt, row.output_tokens, row.slo_met, row.slo_total) == (4, 360.0, 80, 3, 4)
    from telemetry.histogram import bin_of

    assert getattr(row, f"ttft_b{bin_of(150):02d}") == 4
    assert getattr(row, f"e2e_b{bin_of(2000):02d}") == 4
