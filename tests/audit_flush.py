"""Test-database flushes versus the append-only audit tables and the rows migrations seed.

TransactionTestCase and live-server tests empty every table after each test; on SQLite that is a
`DELETE FROM`, which the append-only triggers refuse (PostgreSQL's flush is a TRUNCATE, which row
triggers do not see). The flush lifts the delete guard for itself and puts it back at once; the
append-only tests run inside ordinary transactions, against the real guard.

A flush also empties what data migrations put there: the history-context row the SQLite audit
triggers read the actor from, and the Celery beat schedules. Serially, pytest-django runs every
transactional test after the plain ones, so nothing noticed; under xdist a worker takes whole files in
turn and a later file's plain tests met an empty table (actor recorded as NULL, no schedule). After each
flush the seeded rows are put back by the migrations' own functions.
"""

from __future__ import annotations

from typing import Any

import pytest

from entitlements.history_triggers import APPEND_ONLY, install, live_models


def _seeding_functions() -> list[Any]:
    """The forward functions of config.beat's schedule migrations, in migration order."""
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.operations.special import RunPython

    loader = MigrationLoader(connection, ignore_no_migrations=True)
    found: dict[tuple[Any, int], Any] = {}
    for leaf in loader.graph.leaf_nodes():
        for node in loader.graph.forwards_plan(leaf):
            for i, op in enumerate(loader.graph.nodes[node].operations):
                if isinstance(op, RunPython) and op.code.__qualname__ == "_schedule.<locals>.forwards":
                    found[(node, i)] = op.code
    return list(found.values())


def reseed(seeders: list[Any]) -> None:
    from django.apps import apps

    from entitlements.models import HistoryContext

    HistoryContext.objects.get_or_create(id=1, defaults={"actor_id": None, "reason": ""})
    for forwards in seeders:
        forwards(apps, None)


@pytest.fixture(autouse=True, scope="session")
def flush_past_append_only() -> Any:
    # Imported here: importing the SQLite backend's operations module first is a circular import.
    from django.db.backends.base.operations import BaseDatabaseOperations
    from django.db.backends.sqlite3.base import DatabaseOperations

    base_flush = BaseDatabaseOperations.execute_sql_flush
    seeders: list[Any] | None = None

    def flush_then_reseed(self: Any, sql_list: list[str]) -> None:
        nonlocal seeders
        base_flush(self, sql_list)
        if seeders is None:
            seeders = _seeding_functions()
        reseed(seeders)

    def sqlite_flush(self: Any, sql_list: list[str]) -> None:
        with self.connection.cursor() as cur:
            for table in APPEND_ONLY:
                cur.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
        try:
            flush_then_reseed(self, sql_list)
            # Deleting an entitlement fires its history trigger: a flush that emptied the history table
            # before the entitlements' one left their "delete" rows behind for the next test to count.
            with self.connection.cursor() as cur:
                for table in APPEND_ONLY:
                    cur.execute(f"DELETE FROM {table}")
        finally:
            install(self.connection, live_models())

    BaseDatabaseOperations.execute_sql_flush = flush_then_reseed  # type: ignore[method-assign]
    DatabaseOperations.execute_sql_flush = sqlite_flush  # type: ignore[method-assign]
    yield
    BaseDatabaseOperations.execute_sql_flush = base_flush  # type: ignore[method-assign]
    del DatabaseOperations.execute_sql_flush
