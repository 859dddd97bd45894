"""`manage.py evaluate_alerts [--every SECONDS]`: evaluate the rules once, or in a loop.

With a broker, beat runs alerts.tasks.evaluate_rules every minute. The embedded default has no
beat, so `make run` starts this loop instead; it also sends webhook retries whose backoff passed.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.management.base import BaseCommand

from alerts.tasks import deliver_due_webhooks, evaluate_rules

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Evaluate alert rules (and send due webhook retries), once or every N seconds."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--every", type=float, default=0, help="seconds between passes; 0: once")

    def handle(self, *args: Any, every: float = 0, **options: Any) -> None:
        while True:
            try:
                result = evaluate_rules()  # called in this process: no result backend needed
                deliver_due_webhooks()
                self.stdout.write(f"alerts: {result}")
            except Exception:
                if every <= 0:
                    raise
                # a locked SQLite file or a lost connection: try again next pass, keep `make run` up
                log.exception("alert evaluation pass failed")
            if every <= 0:
                return
            time.sleep(every)
