"""Database triggers that keep a failover reserve to its host's model (PostgreSQL and SQLite).

A reserve stands in for capacity of one model: a host serving another model cannot re-land
that traffic. The services say so with a 400 naming the field; these triggers refuse the same
row when it arrives any other way (raw SQL, bulk writes), and refuse changing the model of a
pool that reserves link. A zone reserve's zone must be in its protected pool's region.

SQLite drops a table's triggers when a migration rebuilds the table, so `install` is idempotent
and runs again after every migrate (entitlements.apps).
"""

from __future__ import annotations

from typing import Any

MESSAGE_MODEL = "failover reserve: the host pool serves another model than the pool it protects"
MESSAGE_ZONE = "failover reserve: the protected zone is not in the region of the protected pool"
MESSAGE_POOL = "pool: its model cannot change while failover reserves link it"

PG_INSTALL = f"""
CREATE OR REPLACE FUNCTION entitlements_reserve_check() RETURNS trigger AS $$
BEGIN
  IF (SELECT model_id FROM entitlements_pool WHERE id = NEW.host_pool_id)
     IS DISTINCT FROM (SELECT model_id FROM entitlements_pool WHERE id = NEW.protected_pool_id) THEN
    RAISE EXCEPTION '{MESSAGE_MODEL}' USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.protected_zone_id IS NOT NULL AND (SELECT region_id FROM entitlements_zone WHERE id = NEW.protected_zone_id)
     IS DISTINCT FROM (SELECT region_id FROM entitlements_pool WHERE id = NEW.protected_pool_id) THEN
    RAISE EXCEPTION '{MESSAGE_ZONE}' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS entitlements_reserve_check_trg ON entitlements_failoverreserve;
CREATE TRIGGER entitlements_reserve_check_trg BEFORE INSERT OR UPDATE ON entitlements_failoverreserve
FOR EACH ROW EXECUTE FUNCTION entitlements_reserve_check();
CREATE OR REPLACE FUNCTION entitlements_pool_model_check() RETURNS trigger AS $$
BEGIN
  IF NEW.model_id <> OLD.model_id AND EXISTS (
    SELECT 1 FROM entitlements_failoverreserve WHERE host_pool_id = NEW.id OR protected_pool_id = NEW.id
  ) THEN
    RAISE EXCEPTION '{MESSAGE_POOL}' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS entitlements_pool_model_check_trg ON entitlements_pool;
CREATE TRIGGER entitlements_pool_model_check_trg BEFORE UPDATE OF model_id ON entitlements_pool
FOR EACH ROW EXECUTE FUNCTION entitlements_pool_model_check();
"""  # noqa: S608 - built from this module's constants, no input

PG_UNINSTALL = """
DROP TRIGGER IF EXISTS entitlements_reserve_check_trg ON entitlements_failoverreserve;
DROP TRIGGER IF EXISTS entitlements_pool_model_check_trg ON entitlements_pool;
DROP FUNCTION IF EXISTS entitlements_reserve_check();
DROP FUNCTION IF EXISTS entitlements_pool_model_check();
"""

_SQLITE_RESERVE_WHEN = """
  (SELECT model_id FROM entitlements_pool WHERE id = NEW.host_pool_id)
    IS NOT (SELECT model_id FROM entitlements_pool WHERE id = NEW.protected_pool_id)
"""
_SQLITE_ZONE_WHEN = """
  NEW.protected_zone_id IS NOT NULL AND (SELECT region_id FROM entitlements_zone WHERE id = NEW.protected_zone_id)
    IS NOT (SELECT region_id FROM entitlements_pool WHERE id = NEW.protected_pool_id)
"""


def _sqlite_statements() -> list[str]:
    out = []
    for op in ("insert", "update"):
        for name, when, message in (
            ("model", _SQLITE_RESERVE_WHEN, MESSAGE_MODEL),
            ("zone", _SQLITE_ZONE_WHEN, MESSAGE_ZONE),
        ):
            trigger = f"entitlements_reserve_{name}_{op}"
            out.append(f"DROP TRIGGER IF EXISTS {trigger}")
            out.append(
                f"CREATE TRIGGER {trigger} BEFORE {op.upper()} ON entitlements_failoverreserve WHEN {when} "
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
    out.append("DROP TRIGGER IF EXISTS entitlements_pool_model_check")
    out.append(
        "CREATE TRIGGER entitlements_pool_model_check BEFORE UPDATE OF model_id ON entitlements_pool "  # noqa: S608
        "WHEN NEW.model_id <> OLD.model_id AND EXISTS (SELECT 1 FROM entitlements_failoverreserve "
        "WHERE host_pool_id = NEW.id OR protected_pool_id = NEW.id) "
        f"BEGIN SELECT RAISE(ABORT, '{MESSAGE_POOL}'); END"
    )
    return out


def install(connection: Any) -> None:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(PG_INSTALL)
        elif connection.vendor == "sqlite":
            for sql in _sqlite_statements():
                cur.execute(sql)
        else:
            raise RuntimeError(f"failover reserve triggers: unsupported database {connection.vendor}")


def uninstall(connection: Any) -> None:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(PG_UNINSTALL)
        else:
            for op in ("insert", "update"):
                for name in ("model", "zone"):
                    cur.execute(f"DROP TRIGGER IF EXISTS entitlements_reserve_{name}_{op}")
            cur.execute("DROP TRIGGER IF EXISTS entitlements_pool_model_check")


def reinstall_after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: put the triggers back if a table rebuild dropped them (SQLite)."""
    from django.db import connections

    connection = connections[using]
    tables = connection.introspection.table_names()
    if "entitlements_failoverreserve" in tables and "entitlements_pool" in tables:
        install(connection)
