"""Test-database flushes versus the append-only audit tables.

TransactionTestCase and live-server tests empty every table after each test; on SQLite that is a
`DELETE FROM`, which the append-only triggers refuse (PostgreSQL's flush is a TRUNCATE, which row
triggers do not see). The flush lifts the delete guard for itself and puts it back at once; the
append-only tests run inside ordinary transactions, against the real guard.
"""

from __future__ import annotations

from typing import Any

import pytest

from entitlements.history_triggers import APPEND_ONLY, install, live_models


@pytest.fixture(autouse=True, scope="session")
def flush_past_append_only() -> Any:
    # Imported here: importing the SQLite backend's operations module first is a circular import.
    from django.db.backends.sqlite3.base import DatabaseOperations

    original = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: Any, sql_list: list[str]) -> None:
        with self.connection.cursor() as cur:
            for table in APPEND_ONLY:
                cur.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
        try:
            original(self, sql_list)
        finally:
            install(self.connection, live_models())

    DatabaseOperations.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign]
    yield
    DatabaseOperations.execute_sql_flush = original  # type: ignore[method-assign]
