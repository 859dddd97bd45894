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

The change log (`admission_snapshotchange`, issue 35.2): the entitlement table's trigger also appends
each written row's scope ids (old and new scope when an update moves it), so a reader re-sums only
the scopes written since the last log id it saw. On PostgreSQL the log row is written after the
counter bump in the same deferred trigger, while the counter row is locked until commit: ids are
handed out in commit order and a reader never sees id n+1 without n (a gap means rows were lost or
pruned: the reader rebuilds whole). Tenant, project and class rows rename or move every scope of
theirs: they log `everything`, as does a transaction past LOG_CAP rows (a bulk write: one full
rebuild is cheaper than re-summing thousands of scopes one by one). The log keeps its last
LOG_KEEP rows (pruned every LOG_PRUNE_EVERY ids by the trigger itself).
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

LOG = "admission_snapshotchange"
SCOPE_COLUMNS = ("tenant_id", "project_id", "model_id", "region_id", "traffic_class")
# table → what its rows' writes log: each row's scope, or `everything` (the reader rebuilds whole)
LOGGED = {
    "entitlements_entitlement": "scope",
    "entitlements_tenant": "everything",
    "entitlements_project": "everything",
    "entitlements_trafficclass": "everything",
}
LOG_CAP = 256  # scope rows one PostgreSQL transaction logs before it logs `everything` instead
LOG_KEEP = 10_000
LOG_PRUNE_EVERY = 1_000

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


_COLS = ", ".join(SCOPE_COLUMNS)
_NEW = ", ".join(f"NEW.{c}" for c in SCOPE_COLUMNS)
_OLD = ", ".join(f"OLD.{c}" for c in SCOPE_COLUMNS)
_MOVED = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in SCOPE_COLUMNS)


def _pg_log_row() -> str:
    """One log row, and every LOG_PRUNE_EVERY ids the rows older than the last LOG_KEEP go (built at
    install time, from the constants as they are then)."""
    return f"""
CREATE OR REPLACE FUNCTION admission_snap_log_row(everything boolean, t bigint, p bigint, m bigint, r bigint,
                                                  c varchar) RETURNS void AS $$
DECLARE got bigint;
BEGIN
  INSERT INTO {LOG} (everything, {_COLS}) VALUES (everything, t, p, m, r, c) RETURNING id INTO got;
  IF got % {LOG_PRUNE_EVERY} = 0 THEN DELETE FROM {LOG} WHERE id <= got - {LOG_KEEP}; END IF;
END $$ LANGUAGE plpgsql;
"""


# The entitlements counter, then the log row: the counter row stays locked to commit, so log ids
# follow commit order. 'headroom.snap_logged' counts this transaction's rows (LOG_CAP + 1: done).
PG_LOG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION admission_snap_log() RETURNS trigger AS $$
DECLARE n int := coalesce(nullif(current_setting('headroom.snap_logged', true), ''), '0')::int;
BEGIN
  IF coalesce(current_setting('headroom.snap_bumped_entitlements', true), '') <> '1' THEN
    PERFORM set_config('headroom.snap_bumped_entitlements', '1', true);
    INSERT INTO {COUNTERS} (id, {", ".join(PARTS)}) VALUES (1, {", ".join("1" if p == "entitlements" else "0" for p in PARTS)})
    ON CONFLICT (id) DO UPDATE SET entitlements = {COUNTERS}.entitlements + 1;
  END IF;
  IF n > {LOG_CAP} THEN RETURN NULL; END IF;
  IF TG_ARGV[0] = 'everything' OR n = {LOG_CAP} THEN
    PERFORM set_config('headroom.snap_logged', '{LOG_CAP + 1}', true);
    PERFORM admission_snap_log_row(true, NULL, NULL, NULL, NULL, NULL);
    RETURN NULL;
  END IF;
  PERFORM set_config('headroom.snap_logged', (n + 1)::text, true);
  IF TG_OP <> 'INSERT' THEN
    PERFORM admission_snap_log_row(false, {_OLD});
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND ({_MOVED})) THEN
    PERFORM admission_snap_log_row(false, {_NEW});
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
"""


def _pg_statements(tables: set[str]) -> list[str]:
    logging = LOG in tables
    out = [PG_FUNCTION] + ([_pg_log_row(), PG_LOG_FUNCTION] if logging else [])
    for table, part in TABLES.items():
        if table not in tables:
            continue
        fn = (
            f"admission_snap_log('{LOGGED[table]}')"
            if logging and table in LOGGED
            else f"admission_snap_bump('{part}')"
        )
        out.append(f"DROP TRIGGER IF EXISTS admission_snap_trg ON {table}")
        out.append(
            f"CREATE CONSTRAINT TRIGGER admission_snap_trg AFTER INSERT OR UPDATE OR DELETE ON {table} "
            f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {fn}"
        )
    return out


def _sqlite_log(table: str, op: str) -> list[str]:
    """The log rows of one SQLite row trigger (no transaction state: every row logs, no cap)."""
    last = f"(SELECT MAX(id) FROM {LOG})"  # the row just logged (ids only grow: AUTOINCREMENT)
    prune = f"DELETE FROM {LOG} WHERE {last} % {LOG_PRUNE_EVERY} = 0 AND id <= {last} - {LOG_KEEP};"
    insert = f"INSERT INTO {LOG} (everything, {_COLS})"
    if LOGGED[table] == "everything":
        return [f"{insert} VALUES (1, NULL, NULL, NULL, NULL, NULL);", prune]
    rows = {
        "insert": [f"{insert} VALUES (0, {_NEW});"],
        "delete": [f"{insert} VALUES (0, {_OLD});"],
        "update": [
            f"{insert} VALUES (0, {_OLD});",
            f"{insert} SELECT 0, {_NEW} WHERE {_MOVED.replace('IS DISTINCT FROM', 'IS NOT')};",
        ],
    }[op]
    return [*rows, prune]


def _sqlite_statements(tables: set[str]) -> list[str]:
    out = []
    logging = LOG in tables
    for table, part in TABLES.items():
        if table not in tables:
            continue
        values = ", ".join("1" if p == part else "0" for p in PARTS)
        for op in ("insert", "update", "delete"):
            name = f"admission_snap_{table}_{op}"
            log = _sqlite_log(table, op) if logging and table in LOGGED else []
            out.append(f"DROP TRIGGER IF EXISTS {name}")
            out.append(
                f"CREATE TRIGGER {name} AFTER {op.upper()} ON {table}\nBEGIN\n"
                f"  INSERT INTO {COUNTERS} (id, {', '.join(PARTS)}) VALUES (1, {values})\n"
                f"  ON CONFLICT (id) DO UPDATE SET {part} = {part} + 1;\n" + "".join(f"  {x}\n" for x in log) + "END"
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


def read_with_log(connection: Any) -> tuple[tuple[int, ...] | None, int]:
    """The counters (None while none) and the newest change-log id (0: an empty log), in one query:
    the one a check costs when nothing moved."""
    cols = ", ".join(f"c.{p}" for p in PARTS)
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT {cols}, l.last FROM (SELECT MAX(id) AS last FROM {LOG}) l LEFT JOIN {COUNTERS} c ON c.id = 1"
        )
        row = cur.fetchone()
    stamp = None if row[0] is None else tuple(int(v) for v in row[:-1])
    return stamp, int(row[-1] or 0)


def changes(connection: Any, after: int, upto: int) -> list[tuple[Any, ...]]:
    """The log rows after id `after` up to `upto`: (id, everything, *SCOPE_COLUMNS), by id."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT id, everything, {_COLS} FROM {LOG} WHERE id > %s AND id <= %s ORDER BY id", [after, upto])
        return cur.fetchall()


def reinstall_after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: SQLite rebuilds a table to alter it, dropping its triggers; put them back."""
    from django.db import connections

    connection = connections[using]
    if COUNTERS in connection.introspection.table_names():
        install(connection)
