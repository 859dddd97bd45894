# ruff: noqa: S608 - SQL built only from this module's constants, never input
"""Change counters for the admission snapshot, kept by database triggers (PostgreSQL and SQLite).

The snapshot (admission.params) is read from several tables; any write to them, by a service,
a queryset `.update()`, the admin, a migration or raw SQL, must reach every process that holds a
snapshot. Signals miss all but ORM saves in the writing process, so the database itself counts:
one row (`admission_snapshotversion`, id 1) with one counter per part of the snapshot, bumped by
a trigger on every table that part is read from. A process reads that row (one query) every
ADMISSION_SNAPSHOT_CHECK_S and re-reads only the parts whose counter moved.

These triggers are this app's own (names start `admission_snap`), separate from the entitlement
history triggers. PostgreSQL: deferred constraint triggers, so the counter row is locked only
while a writer commits (not from its first write on: no lock-order deadlock with pool row locks,
no serialising unrelated writers), and a transaction-local flag bumps each part once per
transaction however many rows it wrote. The bump commits with the data, so a reader that reads
the counters first and the rows after never caches rows older than the counters it saw.
SQLite has neither deferred nor statement triggers: one bump per row (writers are serialised).
The bump is an upsert, so a flushed counter table (transactional tests) starts again by itself.
"""

from __future__ import annotations

from typing import Any

COUNTERS = "admission_snapshotversion"
PARTS = ("entitlements", "supply", "health", "catalogue")

# table → the counter its writes bump. Catalogue rows (model weights and R, slugs) feed both
# entitlement scopes and pool rates, so the reader treats `catalogue` as both.
TABLES = {
    "entitlements_entitlement": "entitlements",
    "entitlements_tenant": "entitlements",
    "entitlements_project": "entitlements",
    "entitlements_trafficclass": "entitlements",
    "entitlements_pool": "supply",
    "entitlements_poolzone": "supply",
    "entitlements_zone": "supply",
    "entitlements_failoverreserve": "supply",
    "entitlements_operatingpoint": "supply",
    "entitlements_servedmodel": "catalogue",
    "entitlements_region": "catalogue",
    "admission_poolhealthoverride": "health",
    "admission_carriedusage": "entitlements",  # usage an import hands to in-process stores (atlas_carry)
    "telemetry_fleetsample": "health",
    "telemetry_poolalert": "health",  # supply alerts take replicas out (telemetry.alertmanager)
}

PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION admission_snap_bump() RETURNS trigger AS $$
DECLARE part text := TG_ARGV[0]; flag text := 'headroom.snap_bumped_' || TG_ARGV[0];
BEGIN
  IF current_setting(flag, true) = '1' THEN RETURN NULL; END IF;
  PERFORM set_config(flag, '1', true);
  INSERT INTO {COUNTERS} (id, {", ".join(PARTS)}) VALUES (1, {", ".join(f"(part = '{p}')::int" for p in PARTS)})
  ON CONFLICT (id) DO UPDATE SET {", ".join(f"{p} = {COUNTERS}.{p} + (part = '{p}')::int" for p in PARTS)};
  RETURN NULL;
END $$ LANGUAGE plpgsql;
"""


def _pg_statements(tables: set[str]) -> list[str]:
    out = [PG_FUNCTION]
    for table, part in TABLES.items():
        if table not in tables:
            continue
        out.append(f"DROP TRIGGER IF EXISTS admission_snap_trg ON {table}")
        out.append(
            f"CREATE CONSTRAINT TRIGGER admission_snap_trg AFTER INSERT OR UPDATE OR DELETE ON {table} "
            f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION admission_snap_bump('{part}')"
        )
    return out


def _sqlite_statements(tables: set[str]) -> list[str]:
    out = []
    for table, part in TABLES.items():
        if table not in tables:
            continue
        values = ", ".join("1" if p == part else "0" for p in PARTS)
        for op in ("insert", "update", "delete"):
            name = f"admission_snap_{table}_{op}"
            out.append(f"DROP TRIGGER IF EXISTS {name}")
            out.append(
                f"CREATE TRIGGER {name} AFTER {op.upper()} ON {table}\nBEGIN\n"
                f"  INSERT INTO {COUNTERS} (id, {', '.join(PARTS)}) VALUES (1, {values})\n"
                f"  ON CONFLICT (id) DO UPDATE SET {part} = {part} + 1;\nEND"
            )
    return out


def statements(vendor: str, tables: set[str]) -> list[str]:
    if vendor == "postgresql":
        return _pg_statements(tables)
    if vendor == "sqlite":
        return _sqlite_statements(tables)
    raise RuntimeError(f"snapshot triggers: unsupported database {vendor}")


def install(connection: Any) -> None:
    """(Re)create the triggers on every listed table that exists (a table added later gets its
    trigger from the post_migrate reinstall once its own migration has run)."""
    tables = set(connection.introspection.table_names())
    with connection.cursor() as cur:
        for sql in statements(connection.vendor, tables):
            cur.execute(sql)


def uninstall(connection: Any) -> None:
    tables = set(connection.introspection.table_names())
    with connection.cursor() as cur:
        for table in TABLES.keys() & tables:
            if connection.vendor == "postgresql":
                cur.execute(f"DROP TRIGGER IF EXISTS admission_snap_trg ON {table}")
            else:
                for op in ("insert", "update", "delete"):
                    cur.execute(f"DROP TRIGGER IF EXISTS admission_snap_{table}_{op}")


def read(connection: Any) -> tuple[int, ...] | None:
    """The counters, in PARTS order (one query); None while no write has been counted yet."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT {', '.join(PARTS)} FROM {COUNTERS} WHERE id = 1")
        row = cur.fetchone()
    return tuple(int(v) for v in row) if row else None


def reinstall_after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: SQLite rebuilds a table to alter it, dropping its triggers; put them back."""
    from django.db import connections

    connection = connections[using]
    if COUNTERS in connection.introspection.table_names():
        install(connection)
