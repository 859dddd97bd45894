"""`manage.py seed_history [--days 56]`: demo demand history for forecasts and cost (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.history import seed_history


class Command(BaseCommand):
    help = "Write past demand for the demo's active entitlements into the rollups (skips if history exists)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=int, default=56)

    def handle(self, *args: Any, **opts: Any) -> None:
        n = seed_history(days=opts["days"])
        self.stdout.write(f"demo history: {n} requests written" if n else "demo history: already present, unchanged")
