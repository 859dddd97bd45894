"""Celery entry points: a run on demand and the daily one on beat (migration 0002)."""

from __future__ import annotations

from celery import shared_task

from reconciliation import services


@shared_task(acks_late=True)
def run_reconciliation(run_id: str) -> str:
    return services.run_execute(run_id).status


@shared_task(acks_late=True)
def schedule_reconciliation() -> str:
    return str(services.run_request(trigger="schedule").pk)
