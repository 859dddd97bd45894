"""Celery entry points, kept thin: claim the run, call the service.

acks_late + reject_on_worker_lost: a worker killed mid-run leaves the message unacknowledged, so
the broker redelivers it; the claim in forecasting.services decides whether the redelivery takes
over (the old claimant stopped checkpointing) or steps aside.
"""

from __future__ import annotations

import os
import socket

from celery import shared_task
from django.db import InterfaceError, OperationalError

from forecasting import services

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=5)
def run_forecast(self, run_id: str) -> str:
    worker = f"{socket.gethostname()}:{os.getpid()}:{self.request.id}"
    outcome = services.forecast_run_claim(run_id=run_id, worker=worker)
    if outcome == "busy":
        # A live worker holds it; look again once its heartbeat would have gone stale.
        raise self.retry(countdown=services.stale_after().total_seconds())
    if outcome == "done":
        return outcome
    try:
        services.forecast_run_execute(run_id=run_id, worker=worker)
    except services.ClaimLost:
        return "lost"
    except TRANSIENT as exc:
        services.forecast_run_release(run_id=run_id, worker=worker)
        raise self.retry(exc=exc, countdown=30 * (self.request.retries + 1))
    except Exception as exc:
        services.forecast_run_fail(run_id=run_id, worker=worker, error=f"{type(exc).__name__}: {exc}")
        raise
    return "succeeded"


@shared_task(acks_late=True)
def schedule_forecast(**parameters: object) -> str:
    """Target of the beat schedule (a PeriodicTask row, editable in the admin)."""
    return str(services.forecast_run_request(parameters=dict(parameters), trigger="schedule").pk)
