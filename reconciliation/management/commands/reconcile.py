"""`manage.py reconcile`: one reconciliation run now (inline under the embedded default, else queued
for a worker), then a count of open findings by kind."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db.models import Count

from reconciliation.models import Finding, ReconciliationRun
from reconciliation.services import run_request


class Command(BaseCommand):
    help = "Run reconciliation now and print the open findings by kind."

    def handle(self, *args: Any, **options: Any) -> None:
        run = run_request(trigger="manual")
        run = ReconciliationRun.objects.get(pk=run.pk)
        self.stdout.write(f"reconciliation run {run.pk}: {run.status}, {run.entitlements_read} entitlements read")
        if run.error:
            self.stderr.write(run.error)
        for row in Finding.objects.filter(state="open").values("kind").annotate(n=Count("id")).order_by("kind"):
            self.stdout.write(f"  {row['kind']}: {row['n']} open")
