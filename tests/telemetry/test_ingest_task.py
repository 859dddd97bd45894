"""The ingest task: a batch that keeps failing is retried a bounded number of times with
exponential backoff, then dead-lettered whole; the queue goes on."""

from __future__ import annotations

import pytest
from celery.signals import task_retry
from django.db import connection
from django.utils import timezone

from telemetry.models import AdmissionEvent, DeadLetter
from telemetry.tasks import INGEST_MAX_RETRIES, ingest_events_batch, retry_delay
from tests.telemetry.helpers import event

TABLE = AdmissionEvent._meta.db_table


def _events(n: int) -> list[dict]:
    return [event(i, ts=timezone.now().isoformat()) for i in range(n)]


def _move_events_table(away: bool) -> None:
    """A real, lasting failure of every ingest: the events table is not where ingest writes."""
    qn = connection.ops.quote_name
    old, new = (TABLE, f"{TABLE}_away") if away else (f"{TABLE}_away", TABLE)
    with connection.cursor() as cur:
        cur.execute(f"ALTER TABLE {qn(old)} RENAME TO {qn(new)}")


@pytest.fixture
def tries():
    seen: list[int] = []

    def count(sender=None, request=None, **kw):
        seen.append(request.retries)

    task_retry.connect(count, sender=ingest_events_batch, weak=False)
    yield seen
    task_retry.disconnect(count, sender=ingest_events_batch)


def test_a_batch_that_keeps_failing_is_retried_then_dead_lettered(fleet, tries):
    _move_events_table(away=True)
    ingest_events_batch.delay(_events(3), source="admission")
    _move_events_table(away=False)
    assert tries == list(range(INGEST_MAX_RETRIES))  # bounded: 5 retries after the first try
    dl = DeadLetter.objects.get()
    assert (dl.stage, dl.key) == ("ingest_task", "admission r0..r2 (3)")
    assert dl.error.startswith(f"after {INGEST_MAX_RETRIES + 1} tries: ")
    assert [e["event_id"] for e in dl.payload["events"]] == ["r0", "r1", "r2"]
    # the next batch lands: nothing is stuck behind the quarantined one
    ingest_events_batch.delay(_events(2), source="admission")
    assert AdmissionEvent.objects.count() == 2


def test_a_batch_that_fails_once_lands_on_its_retry(fleet, tries):
    _move_events_table(away=True)

    def back(**kw):
        _move_events_table(away=False)

    task_retry.connect(back, sender=ingest_events_batch, weak=False)
    try:
        ingest_events_batch.delay(_events(4), source="admission")
    finally:
        task_retry.disconnect(back, sender=ingest_events_batch)
    assert tries == [0]
    assert AdmissionEvent.objects.count() == 4
    assert not DeadLetter.objects.exists()


def test_a_batch_that_can_never_succeed_is_dead_lettered_without_retries(fleet, tries):
    ingest_events_batch.delay(_events(1), source="x" * 65)
    assert tries == []
    assert DeadLetter.objects.get().error.startswith("after 1 tries: ValueError")


def test_the_backoff_doubles_up_to_its_cap():
    assert [retry_delay(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert ingest_events_batch.max_retries == INGEST_MAX_RETRIES is not None
