"""Where admission events go: telemetry's ingest, and its dead letter for a batch that will not go.

Handed to the event buffer by AdmissionConfig.ready() (through admission.tasks.default_sink, which
picks inline ingest or a Celery worker), so admission.events itself imports no telemetry.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import close_old_connections

from admission.events import THREAD_NAME
from telemetry.deadletter import dead_letter
from telemetry.services import ingest_events

STAGE = "admission.events"


def ingest(events: list[dict[str, Any]]) -> Any:
    """Ingest one batch here. The long-lived flusher thread owns its connection: it drops it when
    stale or broken, before and after."""
    if threading.current_thread().name != THREAD_NAME:
        return ingest_events(source="admission", events=events)
    close_old_connections()
    try:
        return ingest_events(source="admission", events=events)
    finally:
        close_old_connections()


def dead_letter_batch(batch: list[dict[str, Any]], error: str) -> None:
    """Quarantine a batch the sink gave up on (raises when the database is down too)."""
    first = batch[0].get("event_id") if batch and isinstance(batch[0], dict) else None
    dead_letter(stage=STAGE, key=f"{first}+{len(batch) - 1}", payload=batch, error=error)
