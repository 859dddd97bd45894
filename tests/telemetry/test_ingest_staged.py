"""PostgreSQL's staged ingest (one COPY into a stage, set-based inserts of keys and events) stores exactly
what the portable path (keys INSERT … ON CONFLICT RETURNING, then the new events) stores."""

from __future__ import annotations

import uuid

import pytest

from telemetry.ingest import EVENT_COLUMNS, _store_portable, _store_staged
from telemetry.models import (
    ROLLUP_ADDITIVE,
    ROLLUP_KEY,
    ROLLUP_MAX,
    AdmissionEvent,
    EventKey,
    MinuteRollup,
    RollupBacklog,
)
from telemetry.services import ingest_events
from tests.telemetry.helpers import event

ENT = str(uuid.UUID(int=7))
STORED = [c for c in EVENT_COLUMNS if c != "received_at"]  # when it was stored differs run to run


def _done(n: int, **kw):
    settled = {"actual_wt": 90.5, "output_tokens": 20 + n, "ttft_ms": 150.0 + n, "e2e_ms": 2000.0,
               "slo_met": n % 2 == 0, "status": "ok"}  # fmt: skip
    return event(n, event_id=f"r{n}:complete", decision="complete", **{**settled, **kw})


def _batches():
    first = [
        event(0),
        event(1, entitlement=ENT, source_kind="entitlement", in_flight=3),
        event(2, decision="throttle", reason="QUOTA_EXCEEDED"),
        event(1),  # a repeat inside the batch: the first occurrence is kept
        event(3, tenant="nobody"),  # bad: named, the rest kept
        _done(4, cached_prompt_tokens=4),
        event(5, prompt_tokens=-1),  # bad
        _done(6, source_kind="borrowed", entitlement=ENT),
    ]
    replay = [
        event(0),  # stored by the first batch
        _done(4, cached_prompt_tokens=4),  # stored
        event(7, traffic_class="gold"),  # bad
        event(8, ts=event(8)["ts"].replace("+00:00", "+02:00")),  # another offset: stored in UTC
        event(8),  # a repeat of a new one
        _done(9, status="error", slo_met=None),
    ]
    return [first, replay, replay]


def _run(store):
    results = [ingest_events(source="gw", events=b, store=store).as_dict() for b in _batches()]
    state = {
        "events": list(AdmissionEvent.objects.order_by("event_id").values_list(*STORED)),
        "keys": list(EventKey.objects.order_by("event_id").values_list("source", "event_id", "ts")),
        "minutes": list(
            MinuteRollup.objects.order_by(*ROLLUP_KEY).values_list(*ROLLUP_KEY, *ROLLUP_ADDITIVE, *ROLLUP_MAX)
        ),
    }
    for model in (AdmissionEvent, EventKey, MinuteRollup, RollupBacklog):
        model.objects.all().delete()
    return results, state


@pytest.mark.postgres
def test_staged_and_portable_paths_store_identical_rows_for_a_mixed_batch(fleet):
    staged_results, staged = _run(_store_staged)
    portable_results, portable = _run(_store_portable)

    assert staged_results == portable_results
    assert [(r["accepted"], r["duplicates"]) for r in staged_results] == [(5, 1), (2, 3), (0, 5)]
    assert [[(e["index"], e["field"]) for e in r["errors"]] for r in staged_results] == [
        [(4, "tenant"), (6, "prompt_tokens")],
        [(2, "traffic_class")],
        [(2, "traffic_class")],
    ]
    assert staged == portable
    assert [e[1] for e in staged["events"]] == ["r0", "r1", "r2", "r4:complete", "r6:complete", "r8", "r9:complete"]
    assert [k[1] for k in staged["keys"]] == [e[1] for e in staged["events"]]
    assert sum(row[len(ROLLUP_KEY)] for row in staged["minutes"]) == 7  # `requests`: each stored event once
    r1 = dict(zip(STORED, staged["events"][1], strict=True))
    assert (str(r1["entitlement"]), r1["source_kind"], r1["in_flight"]) == (ENT, "entitlement", 3)


@pytest.mark.postgres
def test_a_batch_of_replays_only_stores_nothing_and_adds_nothing(fleet):
    events = [event(i) for i in range(4)]
    ingest_events(source="gw", events=events)
    again = ingest_events(source="gw", events=[*events, event(4)])
    assert (again.accepted, again.duplicates) == (1, 4)
    assert sum(MinuteRollup.objects.values_list("requests", flat=True)) == 5
    assert AdmissionEvent.objects.count() == EventKey.objects.count() == 5


@pytest.mark.postgres
def test_a_second_batch_in_one_transaction_finds_the_stage_empty(fleet):
    # the test's own transaction spans both: ON COMMIT DELETE ROWS never comes between them, the DELETE does
    # (without it the second batch's move would meet the first's staged rows and take the slow exact path)
    from django.db import connection

    from telemetry.columns import FIELDS
    from telemetry.staging import STAGE, stage_copy

    ingest_events(source="gw", events=[event(0), event(1)])
    with stage_copy(FIELDS):
        pass
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {STAGE}")  # noqa: S608 - a module constant
        assert cur.fetchone()[0] == 0
    assert ingest_events(source="gw", events=[event(2)]).accepted == 1
    assert sum(MinuteRollup.objects.values_list("requests", flat=True)) == 3
