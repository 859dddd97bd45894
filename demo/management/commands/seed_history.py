"""`manage.py seed_history [--days 56]`: demo demand history for forecasts and cost (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from demo.findings import seed_findings
from demo.history import seed_history


class Command(BaseCommand):
    help = "Write past demand for the demo's active entitlements into the rollups (skips if history exists)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=int, default=56)

    def handle(self, *args: Any, **opts: Any) -> None:
        n = seed_history(days=opts["days"])
        if n:  # what reconciliation should find in it (issue 17.2), once, with the history
            seed_findings(timezone.now().replace(minute=0, second=0, microsecond=0))
        self.stdout.write(f"demo history: {n} requests written" if n else "demo history: already present, unchanged")
