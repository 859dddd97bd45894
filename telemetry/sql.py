"""Bulk SQL that the ORM does not express: INSERT … ON CONFLICT DO NOTHING RETURNING, and additive upserts.

PostgreSQL gets one statement per chunk with one array parameter per column (`unnest`), which keeps
parameter counts and parse time flat; SQLite (≥ 3.35 for RETURNING) gets multi-row VALUES chunked
under its variable limit. Rows are sorted by their conflict key by the callers so concurrent writers
take row locks in the same order and cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models

PG_CHUNK = 20_000
SQLITE_MAX_VARS = 30_000


def _is_pg() -> bool:
    return connection.vendor == "postgresql"


def _columns(model: type[models.Model], names: Sequence[str]) -> list[models.Field]:
    return [model._meta.get_field(n) for n in names]  # type: ignore[misc]


def _prep_sqlite(fields: list[models.Field], rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Only datetime and uuid columns need Django's adaptation on SQLite; the rest pass through."""
    conv = [
        i for i, f in enumerate(fields) if isinstance(f, models.DateTimeField | models.UUIDField | models.BooleanField)
    ]
    out = []
    for r in rows:
        r = list(r)
        for i in conv:
            if r[i] is not None:
                r[i] = fields[i].get_db_prep_value(r[i], connection, prepared=False)
        out.append(r)
    return out


def _cursor() -> Any:
    """On PostgreSQL, psycopg's own cursor (server-side binding, binary arrays): Django's backend
    binds on the client and quotes every array element in Python, which cost more than the insert.
    It is the same connection, so it is inside the caller's transaction."""
    if _is_pg():
        import psycopg  # only PostgreSQL deployments need it

        connection.ensure_connection()
        # Django installs a ClientCursor factory on its connections; ask for a server-binding one
        return psycopg.Cursor(connection.connection)
    return connection.cursor()


def _chunks(rows: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _source(fields: list[models.Field], rows: Sequence[Sequence[Any]]) -> tuple[str, list[Any]]:
    """The row source of an INSERT: unnest(arrays) on PostgreSQL, VALUES on SQLite."""
    qn = connection.ops.quote_name
    cols = ", ".join(qn(f.column) for f in fields)
    if _is_pg():
        arrays = [[r[i] for r in rows] for i in range(len(fields))]
        casts = ", ".join(f"%b::{f.db_type(connection)}[]" for f in fields)  # %b: binary arrays
        # identifiers and types come from model metadata, never from input; values are parameters
        return f"({cols}) SELECT * FROM unnest({casts})", arrays  # noqa: S608
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [v for r in _prep_sqlite(fields, rows) for v in r]
    return f"({cols}) VALUES " + ", ".join([one] * len(rows)), params


def insert_ignore_returning(
    model: type[models.Model],
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    conflict: Sequence[str],
    returning: str,
) -> list[Any]:
    """Insert rows, skip the ones that conflict, return `returning` of the rows actually inserted."""
    if not rows:
        return []
    fields = _columns(model, names)
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    on = ", ".join(qn(model._meta.get_field(c).column) for c in conflict)  # type: ignore[union-attr]
    if _is_pg():
        return _pg_stage_insert(model, fields, rows, on, qn(returning))
    size = max(1, SQLITE_MAX_VARS // len(fields))
    out: list[Any] = []
    with _cursor() as cur:
        for chunk in _chunks(rows, size):
            src, params = _source(fields, chunk)
            cur.execute(f"INSERT INTO {table} {src} ON CONFLICT ({on}) DO NOTHING RETURNING {qn(returning)}", params)
            out.extend(r[0] for r in cur.fetchall())
    return out


def _pg_stage_insert(
    model: type[models.Model], fields: list[models.Field], rows: Sequence[Sequence[Any]], on: str, returning: str
) -> list[Any]:
    """Binary COPY into a session temp table (no WAL, C-speed row encoding), then one
    INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING into the real table, in key order."""
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    stage = qn(f"{model._meta.db_table}_stage")
    cols = ", ".join(qn(f.column) for f in fields)
    with _cursor() as cur:
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS "  # noqa: S608 - model metadata
            f"AS SELECT {cols} FROM {table} WITH NO DATA"
        )
        # ON COMMIT never comes between calls when the caller's transaction spans several of them
        cur.execute(f"TRUNCATE {stage}")
        with cur.copy(f"COPY {stage} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([f.db_type(connection) for f in fields])
            for r in rows:
                copy.write_row(r)
        cur.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {stage} ORDER BY {on} "  # noqa: S608 - model metadata
            f"ON CONFLICT ({on}) DO NOTHING RETURNING {returning}"
        )
        return [r[0] for r in cur.fetchall()]


def upsert_add(
    model: type[models.Model], key: Sequence[str], add: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert rows (key + add columns); on a key conflict add each value to the stored one."""
    if not rows:
        return
    fields = _columns(model, [*key, *add])
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    on = ", ".join(qn(n) for n in key)
    sets = ", ".join(f"{qn(n)} = {table}.{qn(n)} + excluded.{qn(n)}" for n in add)
    size = PG_CHUNK if _is_pg() else max(1, SQLITE_MAX_VARS // len(fields))
    with _cursor() as cur:
        for chunk in _chunks(rows, size):
            src, params = _source(fields, chunk)
            cur.execute(f"INSERT INTO {table} {src} ON CONFLICT ({on}) DO UPDATE SET {sets}", params)


def upsert_replace(
    model: type[models.Model], key: Sequence[str], other: Sequence[str], rows: Sequence[Sequence[Any]]
) -> int:
    """Insert rows; on a key conflict overwrite the other columns (the same sample read twice)."""
    if not rows:
        return 0
    fields = _columns(model, [*key, *other])
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    on = ", ".join(qn(model._meta.get_field(n).column) for n in key)  # type: ignore[union-attr]
    sets = ", ".join(f"{qn(f.column)} = excluded.{qn(f.column)}" for f in fields[len(key) :])
    size = PG_CHUNK if _is_pg() else max(1, SQLITE_MAX_VARS // len(fields))
    with _cursor() as cur:
        for chunk in _chunks(rows, size):
            src, params = _source(fields, chunk)
            cur.execute(f"INSERT INTO {table} {src} ON CONFLICT ({on}) DO UPDATE SET {sets}", params)
    return len(rows)
