"""Who changed an entitlement and why: context read by the history triggers.

PostgreSQL: `SET LOCAL headroom.actor_id / headroom.reason` (transaction-scoped).
SQLite: the single HistoryContext row, written inside the same (IMMEDIATE, hence serialised)
transaction and cleared on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction


@contextmanager
def history_context(*, actor: Any, reason: str) -> Iterator[None]:
    actor_id = getattr(actor, "pk", actor)
    with transaction.atomic():
        with connection.cursor() as cur:
            if connection.vendor == "postgresql":
                cur.execute(
                    "SELECT set_config('headroom.actor_id', %s, true), set_config('headroom.reason', %s, true)",
                    [str(actor_id or ""), reason or ""],
                )
            else:
                cur.execute(
                    "UPDATE entitlements_historycontext SET actor_id = %s, reason = %s WHERE id = 1",
                    [actor_id, reason or ""],
                )
        try:
            yield
        finally:
            # Clear on exit too: an outer transaction may go on writing without this context.
            with connection.cursor() as cur:
                if connection.vendor == "postgresql":
                    cur.execute(
                        "SELECT set_config('headroom.actor_id', '', true), set_config('headroom.reason', '', true)"
                    )
                else:
                    cur.execute("UPDATE entitlements_historycontext SET actor_id = NULL, reason = '' WHERE id = 1")
