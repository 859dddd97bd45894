"""Celery entry points, kept thin: claim the run, call the service.

acks_late + reject_on_worker_lost: a worker killed mid-task leaves the message unacknowledged, so
the broker redelivers it; the claim (the run's in forecasting.services, a chunk's in
forecasting.chunks) decides whether the redelivery takes over (the old claimant stopped
checkpointing) or steps aside. A run fans out into chunk tasks: a dead worker costs one chunk.
"""

from __future__ import annotations

import os
import socket

from celery import Task, group, shared_task
from django.db import InterfaceError, OperationalError, transaction

from forecasting import chunks, services

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=5)
def run_forecast(self: Task, run_id: str) -> str:
    """Claim the run and split it into chunks; the chunks go out as a group once the plan is committed."""
    worker = f"{socket.gethostname()}:{os.getpid()}:{self.request.id}"
    outcome = services.forecast_run_claim(run_id=run_id, worker=worker)
    if outcome == "busy":
        # A live worker holds it; look again once its heartbeat would have gone stale.
        raise self.retry(countdown=services.stale_after().total_seconds())
    if outcome == "done":
        return outcome
    try:
        with transaction.atomic():
            pending = services.forecast_run_plan(run_id=run_id, worker=worker)
            # Sent after commit: a worker must find its chunk row. Redelivered, the plan sends the rest again.
            transaction.on_commit(lambda: group(run_forecast_chunk.s(pk) for pk in pending).apply_async())
    except services.ClaimLost:
        return "lost"
    except TRANSIENT as exc:
        services.forecast_run_release(run_id=run_id, worker=worker)
        raise self.retry(exc=exc, countdown=30 * (self.request.retries + 1))
    except Exception as exc:
        services.forecast_run_fail(run_id=run_id, worker=worker, error=f"{type(exc).__name__}: {exc}")
        raise
    return f"planned {len(pending)} chunks"


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=5)
def run_forecast_chunk(self: Task, chunk_id: int) -> str:
    """Forecast one chunk and write it once; a killed worker's chunk (not the run) is redelivered."""
    token = f"{socket.gethostname()}:{os.getpid()}:{self.request.id}"
    outcome = chunks.claim(chunk_id=chunk_id, token=token)
    if outcome == "busy":
        raise self.retry(countdown=chunks.stale_after().total_seconds())
    if outcome == "done":
        return outcome
    try:
        chunks.execute(chunk_id=chunk_id, token=token)
    except chunks.ClaimLost:
        return "lost"
    except TRANSIENT as exc:
        chunks.release(chunk_id=chunk_id, token=token)
        raise self.retry(exc=exc, countdown=30 * (self.request.retries + 1))
    except Exception as exc:
        chunks.fail(chunk_id=chunk_id, token=token, error=f"{type(exc).__name__}: {exc}")
        raise
    return "written"


@shared_task(acks_late=True)
def schedule_forecast(**parameters: object) -> str:
    """Target of the beat schedule (a PeriodicTask row, editable in the admin)."""
    return str(services.forecast_run_request(parameters=dict(parameters), trigger="schedule").pk)
