"""`manage.py load_demo`: the demo fleet and logins. Running it twice changes nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.fleet import load_demo
from demo.trace import load_demo_trace


class Command(BaseCommand):
    help = "Load the demo fleet (catalogue, pools, reserves, tenants, entitlements, demo logins) and the demo trace."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in load_demo():
            self.stdout.write(line)
        self.stdout.write(load_demo_trace())
