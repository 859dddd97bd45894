"""Celery tasks: thin. Claim the work with a compare-and-swap update, call a service, release."""

from __future__ import annotations

import time
import urllib.error
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.db.models import Q
from django.utils import timezone

from telemetry.metrics import TASK_SECONDS
from telemetry.models import PrometheusSource
from telemetry.prometheus import pull_source

CLAIM = timedelta(seconds=120)
# An event batch is retried this many times, waiting retry_delay(n) before retry n, then dead-lettered:
# 1 + 2 + 4 + 8 + 16 s ≈ half a minute of a database that does not answer, never forever.
INGEST_MAX_RETRIES = 5
INGEST_BACKOFF_CAP_S = 60


def retry_delay(retries: int) -> int:
    """Exponential backoff: 1, 2, 4, … seconds before retry `retries` + 1, capped."""
    return int(min(INGEST_BACKOFF_CAP_S, 2**retries))


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=INGEST_MAX_RETRIES)
def ingest_events_batch(self: Any, events: list[dict[str, Any]], source: str = "admission") -> int:
    """Ingest one batch in a worker; ingest dedups, so a retry after a partial failure is harmless.

    A batch that still fails after INGEST_MAX_RETRIES retries, or that can never succeed (a bad
    source is a ValueError), is dead-lettered whole with its last error, and the queue goes on.
    """
    from telemetry.deadletter import dead_letter
    from telemetry.services import ingest_events

    try:
        return ingest_events(source=source, events=events).accepted
    except Exception as exc:  # noqa: BLE001 - whatever it is, bounded retries then quarantine
        retries = self.request.retries
        if isinstance(exc, ValueError) or retries >= self.max_retries:
            ids = [e.get("event_id") for e in events if isinstance(e, dict)] if isinstance(events, list) else []
            key = f"{source!s:.64} {ids[0] if ids else '?'!s:.60}..{ids[-1] if ids else '?'!s:.60} ({len(ids)})"
            payload = {"source": source, "events": events, "task_id": self.request.id}
            dead_letter(stage="ingest_task", key=key, payload=payload, error=f"after {retries + 1} tries: {exc!r}")
            return 0
        raise self.retry(exc=exc, countdown=retry_delay(retries)) from exc


@shared_task(acks_late=True)
def pull_prometheus_sources() -> int:
    """Beat runs this every 30 s (migration 0002): fan out one pull per enabled source."""
    ids = list(PrometheusSource.objects.filter(enabled=True).values_list("pk", flat=True))
    for pk in ids:
        pull_prometheus_source.delay(pk)
    return len(ids)


@shared_task(
    acks_late=True,
    autoretry_for=(urllib.error.URLError, TimeoutError, ConnectionError),
    retry_backoff=True,
    max_retries=3,
)
def pull_prometheus_source(source_id: int) -> str:
    now = timezone.now()
    # Only one pull per source at a time; a redelivered or overlapping task finds the claim and leaves.
    claimed = (
        PrometheusSource.objects.filter(pk=source_id, enabled=True)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=now + CLAIM)
    )
    if not claimed:
        return "skipped"
    began = time.monotonic()
    try:
        result = pull_source(PrometheusSource.objects.get(pk=source_id), now=now)
    except Exception as exc:
        PrometheusSource.objects.filter(pk=source_id).update(last_error=str(exc)[:2000])
        raise
    finally:
        took = time.monotonic() - began
        TASK_SECONDS.labels("pull_prometheus_source").observe(took)
        PrometheusSource.objects.filter(pk=source_id).update(claimed_until=None, last_duration_s=took)
    return f"{result.samples} samples"


@shared_task(acks_late=True)
def fold_rollups() -> int:
    """Beat runs this every 30 s (migration 0006): hour and day rollups catch up with the minutes."""
    from telemetry.fold import fold

    began = time.monotonic()
    try:
        return fold()
    finally:
        TASK_SECONDS.labels("fold_rollups").observe(time.monotonic() - began)


@shared_task(acks_late=True)
def maintain_storage() -> dict[str, Any]:
    """Beat runs this hourly (migration 0011): partitions ahead, DEFAULT split, every retention applied."""
    from telemetry.retention import maintain

    began = time.monotonic()
    try:
        done = maintain()
        return {"created": done.created, "dropped": done.dropped, "deleted": done.deleted}
    finally:
        TASK_SECONDS.labels("maintain_storage").observe(time.monotonic() - began)
