"""`manage.py admission_relist_inflight`: list every non-empty in-flight zset for the sweep (issue 49.1).

Run once after a rolling deploy of issue 49.1's layout, when old and new processes served side by side:
an old process's expire.lua unlists a zset it empties, and the new reserve.lua lists a zset only with its
scope's first admission, so a reservation abandoned in such a scope would wait for that scope's next
reserve (expire on access) instead of the sweep. Idempotent; a no-op on the in-process store.
docs/operations.md, "The admission store in Redis".
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from admission.backends import get_backend


class Command(BaseCommand):
    help = "List every non-empty in-flight zset of the admission store in its pool's set (the sweep walks it)."

    def handle(self, *args: Any, **options: Any) -> None:
        backend = get_backend()
        relist = getattr(backend, "relist_inflight", None)
        if relist is None:
            self.stdout.write(f"{backend.name}: nothing to list (not a Redis store)")
            return
        self.stdout.write(f"in-flight zsets listed again: {relist()}")
