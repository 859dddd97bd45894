"""Celery tasks for beat: settle reservations past their TTL, push buffered events.

Schedule `admission.tasks.sweep_expired` every ~30 s (django_celery_beat PeriodicTask); reserve
also settles a scope's expired reservations lazily when the scope is at its concurrency cap, and
complete settles a late one, so a late sweep only delays the events.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from admission import events, services


@shared_task(name="admission.tasks.sweep_expired", ignore_result=True)
def sweep_expired(limit: int = 1000) -> int:
    n = services.sweep(limit)
    # A beat worker emits expiry events but serves no requests: flush them now.
    events.buffer().flush()
    return n


@shared_task(
    name="admission.tasks.ingest_events_batch", ignore_result=True, autoretry_for=(Exception,),
    retry_backoff=True, retry_backoff_max=60, max_retries=None,
)  # fmt: skip
def ingest_events_batch(events_: list[dict[str, Any]]) -> None:
    """Admission events handed over by a web process; ingest dedups, so a retry is harmless."""
    events.telemetry_sink(events_)
