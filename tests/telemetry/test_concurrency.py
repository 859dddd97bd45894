"""Concurrent ingest of overlapping batches on PostgreSQL: every event counted once.

Two protections (telemetry.staging): the keys go in with ON CONFLICT DO NOTHING, so a key another
writer stored (or is storing: it waits for that commit) is skipped rather than failing the batch, and
in event_id order, so overlapping writers lock the unique index's entries in one order. The negative
controls run the same overlapping ingest with each taken out: without the first a writer's batch fails
on the unique index (its sender gets a 500 and must retry the whole batch); without the second,
writers deadlock on each other's keys.
"""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connection, transaction

from telemetry import staging
from telemetry.models import AdmissionEvent, DayRollup, EventKey, MinuteRollup
from telemetry.services import ingest_events
from tests.telemetry.helpers import event

N = 4000


def _run_threads(target, n_threads):
    errors = []

    def run(i):
        try:
            target(i)
        except Exception as exc:  # collected, asserted on below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _overlapping_ingest(events, results):
    def ingest(i):
        # each thread sends a different 3/4 of the events, in its own order
        part = [e for j, e in enumerate(events) if j % 4 != i % 4]
        part = part[i * 500 :] + part[: i * 500]
        results.append(ingest_events(source="admission", events=part))

    return _run_threads(ingest, 4)


@pytest.mark.postgres
def test_overlapping_concurrent_batches_count_each_event_once(transactional_db, fleet):
    events = [event(i) for i in range(N)]
    results = []
    assert _overlapping_ingest(events, results) == []
    assert sum(r.accepted for r in results) == N
    assert sum(r.duplicates for r in results) == 4 * (3 * N // 4) - N
    assert AdmissionEvent.objects.count() == N
    assert sum(MinuteRollup.objects.values_list("requests", flat=True)) == N
    assert sum(DayRollup.objects.values_list("requests", flat=True)) == N


def _collide(monkeypatch, name, value):
    """The overlapping ingest with one protection taken out for real, until the collision shows."""
    monkeypatch.setattr(staging, name, value)
    failures, results = [], []
    for attempt in range(5):  # the race is the scheduler's: a few rounds of fresh ids until it shows
        events = [event(attempt * N + i) for i in range(N)]
        results = []
        failures = _overlapping_ingest(events, results)
        if failures:
            break
    assert failures, f"without {name}, overlapping concurrent batches never collided"
    assert len(results) + len(failures) == 4 and len(results) < 4  # a writer's batch failed as a whole
    return failures


@pytest.mark.postgres
def test_negative_control_without_on_conflict_overlapping_batches_fail(transactional_db, fleet, monkeypatch):
    failures = _collide(monkeypatch, "ON_CONFLICT", "")
    assert all("duplicate key" in str(exc) for exc in failures), failures


@pytest.mark.postgres
def test_negative_control_without_the_key_order_overlapping_batches_deadlock(transactional_db, fleet, monkeypatch):
    failures = _collide(monkeypatch, "KEY_ORDER", "ORDER BY random()")
    assert all("deadlock detected" in str(exc) for exc in failures), failures


@pytest.mark.postgres
def test_without_the_probe_a_replay_is_refused_by_the_unique_index(transactional_db, fleet):
    # The dedup index is EventKey's (the partitioned events table cannot have a unique one without ts).
    ingest_events(source="admission", events=[event(1)])
    row = EventKey.objects.values("source", "event_id", "ts").get()
    with pytest.raises(IntegrityError), transaction.atomic():
        EventKey.objects.create(**row)
    assert EventKey.objects.count() == 1
    assert AdmissionEvent.objects.count() == 1
