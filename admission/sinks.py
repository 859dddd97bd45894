"""Where admission events go: telemetry's ingest, and its dead letter for a batch that will not go.

Handed to the event buffer by AdmissionConfig.ready() (through admission.tasks.default_sink, which
picks inline ingest or a Celery worker), so admission.events itself imports no telemetry.

One bad event never costs the batch (docs/input-limits.md): an event ingest refuses by field is
dead-lettered with its error (one row per batch), and a batch whose ingest raises on its data, not on
the database being away, is split until the event that raises is alone; that one is dead-lettered and
every other event is ingested. A database that is down still raises, so the batch is retried whole.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections

from admission.events import THREAD_NAME
from telemetry.deadletter import dead_letter
from telemetry.models import EventKey
from telemetry.services import IngestResult, ingest_events

STAGE = "admission.events"
SOURCE = "admission"  # the source ingest stores these events under
# Failures of the connection or the server: the batch is fine, try it again later, whole.
TRANSIENT = (OperationalError, InterfaceError)


def _ingest_isolating(events: list[dict[str, Any]], offset: int, result: IngestResult) -> None:
    try:
        part = ingest_events(source=SOURCE, events=events)
    except TRANSIENT:
        raise
    except (DatabaseError, ValueError, TypeError, ArithmeticError) as exc:  # the data, not the database
        if len(events) == 1:
            dead_letter_batch(events, f"{type(exc).__name__}: {exc}")
            result.errors.append({"index": offset, "field": "non_field_errors", "message": "dead-lettered"})
            return
        half = len(events) // 2
        _ingest_isolating(events[:half], offset, result)
        _ingest_isolating(events[half:], offset + half, result)
        return
    result.accepted += part.accepted
    result.duplicates += part.duplicates
    result.errors.extend({**e, "index": e["index"] + offset} for e in part.errors)
    if part.errors:
        refused = [events[e["index"]] for e in part.errors if isinstance(e.get("index"), int)]
        first = refused[0].get("event_id") if refused and isinstance(refused[0], dict) else None
        dead_letter(
            stage=STAGE, key=f"refused:{first}+{len(refused) - 1}",
            payload={"events": refused, "errors": part.errors}, error=f"{len(refused)} event(s) refused by ingest",
        )  # fmt: skip


def _ingest(events: list[dict[str, Any]]) -> IngestResult:
    result = IngestResult()
    _ingest_isolating(events, 0, result)
    return result


def ingest(events: list[dict[str, Any]]) -> Any:
    """Ingest one batch here. The long-lived flusher thread owns its connection: it drops it when
    stale or broken, before and after."""
    if threading.current_thread().name != THREAD_NAME:
        return _ingest(events)
    close_old_connections()
    try:
        return _ingest(events)
    finally:
        close_old_connections()


RECEIPT_CHUNK = 1000  # event ids per primary-key lookup


def recorded(event_ids: list[str]) -> set[str]:
    """Which of these admission events PostgreSQL has: their dedup keys, written with them by ingest."""
    own = threading.current_thread().name == THREAD_NAME
    if own:
        close_old_connections()
    try:
        got: set[str] = set()
        for i in range(0, len(event_ids), RECEIPT_CHUNK):
            chunk = event_ids[i : i + RECEIPT_CHUNK]
            got.update(EventKey.objects.filter(source=SOURCE, event_id__in=chunk).values_list("event_id", flat=True))
        return got
    finally:
        if own:
            close_old_connections()


def dead_letter_batch(batch: list[dict[str, Any]], error: str) -> None:
    """Quarantine a batch the sink gave up on (raises when the database is down too)."""
    first = batch[0].get("event_id") if batch and isinstance(batch[0], dict) else None
    dead_letter(stage=STAGE, key=f"{first}+{len(batch) - 1}", payload=batch, error=error)
