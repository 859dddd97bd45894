"""`manage.py seed_launches`: demo launch requests in every state, one waiting for the approver (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.launches import seed_launch_requests


class Command(BaseCommand):
    help = "File demo launch requests through the intake services: draft, submitted, approved, partly approved, rejected, returned."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in seed_launch_requests():
            self.stdout.write(line)
