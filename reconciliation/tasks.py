"""Celery entry points: a run on demand and the daily one on beat (migration 0002).

acks_late + reject_on_worker_lost, as forecasting's: a worker killed mid-run leaves its message
unacknowledged, the broker redelivers it, and the run's claim (runs.claims) lets the redelivery take
the run over once the dead worker's heartbeat is stale, or sends it back to wait while a live one works.
"""

from __future__ import annotations

from celery import Task, shared_task

from reconciliation import services
from reconciliation.models import ReconciliationRun
from runs import claims


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=5)
def run_reconciliation(self: Task, run_id: str) -> str:
    worker = claims.worker_id(self.request.id)
    run = services.run_execute(run_id, worker=worker)
    if run.status == ReconciliationRun.Status.RUNNING and run.claimed_by != worker:
        # A live worker holds it: look again once its heartbeat would have gone stale.
        raise self.retry(countdown=claims.stale_after(ReconciliationRun).total_seconds())
    return run.status


@shared_task(acks_late=True)
def schedule_reconciliation() -> str:
    return str(services.run_request(trigger="schedule").pk)
