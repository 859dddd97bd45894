"""Celery tasks for beat: settle reservations past their TTL, push buffered events.

Schedule `admission.tasks.sweep_expired` every ~30 s (django_celery_beat PeriodicTask); reserve
also settles a scope's expired reservations lazily when the scope is at its concurrency cap, and
complete settles a late one, so a late sweep only delays the events.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from admission import events, services, sinks


@shared_task(name="admission.tasks.sweep_expired", ignore_result=True)
def sweep_expired(limit: int = 1000) -> int:
    n = services.sweep(limit)
    # A beat worker emits expiry events but serves no requests: flush them now.
    events.buffer().flush()
    return n


INGEST_MAX_RETRIES = 5  # with exponential backoff (2, 4, … 32 s, capped at 60 s); then dead-lettered


@shared_task(name="admission.tasks.ingest_events_batch", bind=True, ignore_result=True, acks_late=True,
             max_retries=INGEST_MAX_RETRIES)  # fmt: skip
def ingest_events_batch(self: Any, events_: list[dict[str, Any]]) -> None:
    """Admission events handed over by a web process; ingest dedups, so a retry is harmless. A batch
    that still fails after its retries is dead-lettered (never retried forever: issue 11.2)."""
    try:
        sinks.ingest(events_)
    except Exception as exc:
        if self.request.retries >= INGEST_MAX_RETRIES:
            sinks.dead_letter_batch(events_, f"{type(exc).__name__}: {exc} (after {self.request.retries} retries)")
            return
        raise self.retry(exc=exc, countdown=min(60, 2 ** (self.request.retries + 1))) from exc


def default_sink(events_: list[dict[str, Any]]) -> Any:
    """The event buffer's sink (AdmissionConfig.ready()): with a Celery broker, ingest runs in a worker
    (not on the web worker's GIL); without one, here. A broker that is down raises: the batch stays
    buffered. Handed to a broker, the batch is not yet recorded: the buffer keeps its receipt
    (admission.event_receipts)."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return sinks.ingest(events_)
    # argsrepr: what Celery logs and shows for the call. Left to Celery, it is a saferepr() walk over the
    # whole batch on every hand-off, half of the hand-off's CPU on the web worker (~6 of ~13 µs per event,
    # bench/web_tier.py --handoff); the batch's size and first event say enough in a log line.
    first = events_[0].get("event_id") if events_ and isinstance(events_[0], dict) else None
    ingest_events_batch.apply_async((events_,), argsrepr=f"(<{len(events_)} admission events from {first!r}>,)",
                                    kwargsrepr="{}")  # fmt: skip
    return events.HANDED_OFF
