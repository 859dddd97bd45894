"""`manage.py load_demo_alerts`: the demo's default alert rules. Running it twice changes nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.alert_rules import load_demo_rules


class Command(BaseCommand):
    help = "Add the demo's default alert rules (after load_demo)."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in load_demo_rules():
            self.stdout.write(line)
