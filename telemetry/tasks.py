"""Celery tasks: thin. Claim the work with a compare-and-swap update, call a service, release."""

from __future__ import annotations

import time
import urllib.error
from datetime import timedelta

from celery import shared_task
from django.db.models import Q
from django.utils import timezone

from telemetry.metrics import TASK_SECONDS
from telemetry.models import PrometheusSource
from telemetry.prometheus import pull_source

CLAIM = timedelta(seconds=120)


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
