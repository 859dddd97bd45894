"""`manage.py first_forecast`: the demo's first forecast run, so planning opens on an action list.

Only when no run has succeeded yet (a second `make run` changes nothing). Under the embedded default
it runs here, before the server starts, and says how long it took; with a broker it is queued
for the workers that `make run` starts next (docs/demo.md).
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from forecasting import services
from forecasting.models import ForecastRun


class Command(BaseCommand):
    help = "Run the first forecast (inline under the embedded default) unless one has already succeeded."

    def handle(self, *args: Any, **options: Any) -> None:
        done = ForecastRun.objects.filter(status=ForecastRun.Status.SUCCEEDED).order_by("-finished_at").first()
        if done is not None:
            self.stdout.write(f"forecast: run {done.pk} already succeeded ({done.series_count} series), unchanged")
            return
        started = time.monotonic()
        run = services.forecast_run_request(trigger="manual", background=False)
        run.refresh_from_db()
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            self.stdout.write(f"forecast: run {run.pk} queued for the worker; planning shows its progress")
            return
        took = time.monotonic() - started
        self.stdout.write(
            f"forecast: run {run.pk} {run.status}, {run.series_count} series, {run.chunks_total} chunks in {took:.1f} s"
        )
        if run.status != ForecastRun.Status.SUCCEEDED:
            self.stderr.write(run.error)
