# ruff: noqa: S608 - SQL built only from this module's constants and the models' column names, never input
"""The audit triggers, generated: entitlement history, the access audit, and their append-only guards.

Every write to an entitlement (service, bulk update, raw SQL) bumps its version (when the writer did
not) and appends a history row; every write to a platform role or membership appends a RoleChange.
Who and why come from `entitlements.history.history_context`; without one the row says
`actor = null, reason = 'direct SQL'`. Both audit tables refuse UPDATE and DELETE.

PostgreSQL snapshots the row with `to_jsonb`, so new columns are captured by themselves. SQLite has
no row-to-JSON, so its `json_object(...)` column list is generated here from the model's concrete
fields (`snapshot_columns`) and reinstalled after every migrate (entitlements.apps), never hand-kept.
"""

from __future__ import annotations

from typing import Any

DIRECT_SQL = "direct SQL"
ENTITLEMENT = "entitlements_entitlement"
HISTORY = "entitlements_entitlementhistory"
ROLE_TABLES = ("entitlements_platformrole", "entitlements_membership")
ROLE_AUDIT = "entitlements_rolechange"
APPEND_ONLY = (HISTORY, ROLE_AUDIT)


def snapshot_columns(model: Any) -> list[str]:
    """The columns a history snapshot carries: every concrete field of the model."""
    return [f.column for f in model._meta.concrete_fields]


# PostgreSQL ---------------------------------------------------------------------------------------

PG_CONTEXT = f"""
  actor := NULLIF(current_setting('headroom.actor_id', true), '')::bigint;
  why := COALESCE(current_setting('headroom.reason', true), '');
  IF actor IS NULL AND why = '' THEN why := '{DIRECT_SQL}'; END IF;
"""

PG_FUNCTIONS = f"""
CREATE OR REPLACE FUNCTION entitlements_version_bump() RETURNS trigger AS $$
BEGIN
  -- A writer that did not bump the version (bulk update, raw SQL) gets it bumped here.
  IF NEW.version IS NULL OR NEW.version <= OLD.version THEN NEW.version := OLD.version + 1; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION entitlements_history_capture() RETURNS trigger AS $$
DECLARE row_data jsonb; ent_id bigint; ver integer; actor bigint; why text;
BEGIN
  IF TG_OP = 'DELETE' THEN row_data := to_jsonb(OLD); ent_id := OLD.id; ver := OLD.version;
  ELSE row_data := to_jsonb(NEW); ent_id := NEW.id; ver := NEW.version; END IF;
  {PG_CONTEXT}
  INSERT INTO {HISTORY} (entitlement_id, op, version, snapshot, actor_id, reason, at)
  VALUES (ent_id, lower(TG_OP), ver, row_data, actor, why, clock_timestamp());
  RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION entitlements_role_capture() RETURNS trigger AS $$
DECLARE row_data jsonb; actor bigint; why text;
BEGIN
  IF TG_OP = 'DELETE' THEN row_data := to_jsonb(OLD); ELSE row_data := to_jsonb(NEW); END IF;
  {PG_CONTEXT}
  INSERT INTO {ROLE_AUDIT} (table_name, row_id, user_id, op, snapshot, actor_id, reason, at)
  VALUES (TG_TABLE_NAME, (row_data->>'id')::bigint, (row_data->>'user_id')::bigint, lower(TG_OP), row_data,
          actor, why, clock_timestamp());
  RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION entitlements_append_only() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
END $$ LANGUAGE plpgsql;
"""


def _pg_statements() -> list[str]:
    out = [PG_FUNCTIONS]
    out.append(f"DROP TRIGGER IF EXISTS entitlements_version_trg ON {ENTITLEMENT}")
    out.append(
        f"CREATE TRIGGER entitlements_version_trg BEFORE UPDATE ON {ENTITLEMENT} "
        "FOR EACH ROW EXECUTE FUNCTION entitlements_version_bump()"
    )
    out.append(f"DROP TRIGGER IF EXISTS entitlements_history_trg ON {ENTITLEMENT}")
    out.append(
        f"CREATE TRIGGER entitlements_history_trg AFTER INSERT OR UPDATE OR DELETE ON {ENTITLEMENT} "
        "FOR EACH ROW EXECUTE FUNCTION entitlements_history_capture()"
    )
    for table in ROLE_TABLES:
        out.append(f"DROP TRIGGER IF EXISTS {table}_audit_trg ON {table}")
        out.append(
            f"CREATE TRIGGER {table}_audit_trg AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION entitlements_role_capture()"
        )
    for table in APPEND_ONLY:
        out.append(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        out.append(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION entitlements_append_only()"
        )
    return out


# SQLite -------------------------------------------------------------------------------------------

SQLITE_ACTOR = "(SELECT actor_id FROM entitlements_historycontext WHERE id = 1)"
SQLITE_REASON = (
    f"COALESCE((SELECT CASE WHEN actor_id IS NULL AND reason = '' THEN '{DIRECT_SQL}' ELSE reason END "
    f"FROM entitlements_historycontext WHERE id = 1), '{DIRECT_SQL}')"
)
SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
OPS = (("insert", "NEW"), ("update", "NEW"), ("delete", "OLD"))


def _json(columns: list[str], ref: str) -> str:
    return "json_object(" + ", ".join(f"'{c}', {ref}.\"{c}\"" for c in columns) + ")"


def _sqlite_entitlement(op: str, ref: str, columns: list[str]) -> str:
    if op == "update":
        # SQLite cannot assign NEW: bump in place (recursive triggers are off, so this does not
        # fire again), then snapshot the stored row so the history carries the bumped version.
        bump = f"UPDATE {ENTITLEMENT} SET version = OLD.version + 1 WHERE id = NEW.id AND NEW.version <= OLD.version;"
        insert = (
            f"INSERT INTO {HISTORY} (entitlement_id, op, version, snapshot, actor_id, reason, at) "
            f"SELECT e.id, 'update', e.version, {_json(columns, 'e')}, {SQLITE_ACTOR}, {SQLITE_REASON}, {SQLITE_NOW} "
            f"FROM {ENTITLEMENT} e WHERE e.id = NEW.id;"
        )
        body = f"{bump}\n  {insert}"
    else:
        body = (
            f"INSERT INTO {HISTORY} (entitlement_id, op, version, snapshot, actor_id, reason, at) "
            f"VALUES ({ref}.id, '{op}', {ref}.version, {_json(columns, ref)}, {SQLITE_ACTOR}, {SQLITE_REASON}, "
            f"{SQLITE_NOW});"
        )
    return f"CREATE TRIGGER entitlements_history_{op} AFTER {op.upper()} ON {ENTITLEMENT}\nBEGIN\n  {body}\nEND"


def _sqlite_role(table: str, op: str, ref: str, columns: list[str]) -> str:
    return (
        f"CREATE TRIGGER {table}_audit_{op} AFTER {op.upper()} ON {table}\nBEGIN\n"
        f"  INSERT INTO {ROLE_AUDIT} (table_name, row_id, user_id, op, snapshot, actor_id, reason, at) "
        f"VALUES ('{table}', {ref}.id, {ref}.user_id, '{op}', {_json(columns, ref)}, {SQLITE_ACTOR}, "
        f"{SQLITE_REASON}, {SQLITE_NOW});\nEND"
    )


def _sqlite_statements(models: dict[str, Any]) -> list[str]:
    out: list[str] = []
    ent_columns = snapshot_columns(models[ENTITLEMENT])
    for op, ref in OPS:
        out.append(f"DROP TRIGGER IF EXISTS entitlements_history_{op}")
        out.append(_sqlite_entitlement(op, ref, ent_columns))
    for table in ROLE_TABLES:
        for op, ref in OPS:
            out.append(f"DROP TRIGGER IF EXISTS {table}_audit_{op}")
            out.append(_sqlite_role(table, op, ref, snapshot_columns(models[table])))
    for table in APPEND_ONLY:
        for op in ("update", "delete"):
            out.append(f"DROP TRIGGER IF EXISTS {table}_no_{op}")
            out.append(
                f"CREATE TRIGGER {table}_no_{op} BEFORE {op.upper()} ON {table}\n"
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {op.upper()} refused'); END"
            )
    return out


def statements(vendor: str, models: dict[str, Any]) -> list[str]:
    """`models`: table name → model class (the live ones, or a migration's historical ones)."""
    if vendor == "postgresql":
        return _pg_statements()
    if vendor == "sqlite":
        return _sqlite_statements(models)
    raise RuntimeError(f"audit triggers: unsupported database {vendor}")


def install(connection: Any, models: dict[str, Any]) -> None:
    with connection.cursor() as cur:
        for sql in statements(connection.vendor, models):
            cur.execute(sql)


def live_models() -> dict[str, Any]:
    from entitlements.models import Entitlement, Membership, PlatformRole

    return {m._meta.db_table: m for m in (Entitlement, Membership, PlatformRole)}


def uninstall(connection: Any) -> None:
    """Drop what `install` added on top of migration 0002's capture triggers (which stay)."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(f"DROP TRIGGER IF EXISTS entitlements_version_trg ON {ENTITLEMENT}")
            for table in ROLE_TABLES:
                cur.execute(f"DROP TRIGGER IF EXISTS {table}_audit_trg ON {table}")
            for table in APPEND_ONLY:
                cur.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        else:
            for table in ROLE_TABLES:
                for op, _ in OPS:
                    cur.execute(f"DROP TRIGGER IF EXISTS {table}_audit_{op}")
            for table in APPEND_ONLY:
                for op in ("update", "delete"):
                    cur.execute(f"DROP TRIGGER IF EXISTS {table}_no_{op}")


def reinstall_after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: regenerate the triggers from the live models, so a field added by a later
    migration is in the SQLite snapshot without anyone editing a column list."""
    from django.db import connections

    connection = connections[using]
    if ROLE_AUDIT in connection.introspection.table_names():
        install(connection, live_models())
