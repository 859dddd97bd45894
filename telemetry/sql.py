"""Bulk SQL that the ORM does not express: INSERT … ON CONFLICT DO NOTHING RETURNING, and additive upserts.

PostgreSQL: binary COPY into a session temp table, then INSERT … SELECT … ORDER BY key ON CONFLICT
(measured: binding the same rows as parameters cost more in Python than the insert itself).
SQLite (≥ 3.35 for RETURNING): multi-row VALUES chunked under its variable limit. Writes are
ordered by their conflict key so concurrent writers take row locks in one order and cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection, models, transaction

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


def _values(fields: list[models.Field], rows: Sequence[Sequence[Any]]) -> tuple[str, list[Any]]:
    """SQLite's row source: multi-row VALUES."""
    qn = connection.ops.quote_name
    cols = ", ".join(qn(f.column) for f in fields)  # type: ignore[arg-type]  # concrete fields have columns
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [v for r in _prep_sqlite(fields, rows) for v in r]
    return f"({cols}) VALUES " + ", ".join([one] * len(rows)), params


_PG_NAMES = {"timestamp with time zone": "timestamptz", "double precision": "float8", "serial": "int4"}


def _copy_type(f: models.Field) -> str:
    """psycopg's type registry wants bare names: varchar(64) → varchar, double precision → float8."""
    name = str(f.db_type(connection)).split("(")[0].strip()
    return _PG_NAMES.get(name, name)


def _pg_staged(
    model: type[models.Model], fields: list[models.Field], rows: Sequence[Sequence[Any]], order: str, tail: str
) -> list[Any]:
    """Binary COPY into a session temp table (no WAL, rows encoded in C), then one
    INSERT … SELECT … ORDER BY key ON CONFLICT … into the real table."""
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    stage = qn(f"{model._meta.db_table}_stage")
    cols = ", ".join(qn(f.column) for f in fields)  # type: ignore[arg-type]  # concrete fields have columns
    # One transaction for COPY and INSERT: in autocommit each statement commits on its own, and the
    # stage's ON COMMIT DELETE ROWS would empty it between them (the write would silently add nothing).
    with transaction.atomic(savepoint=False), _cursor() as cur:
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS "  # noqa: S608 - model metadata
            f"AS SELECT {cols} FROM {table} WITH NO DATA"
        )
        # ON COMMIT never comes between calls when the caller's transaction spans several of them.
        # DELETE, not TRUNCATE: the stage is nearly always empty here, and TRUNCATE gives it a new file
        # each time (telemetry.staging measured it)
        cur.execute(f"DELETE FROM {stage}")  # noqa: S608 - model metadata
        with cur.copy(f"COPY {stage} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([_copy_type(f) for f in fields])
            for r in rows:
                copy.write_row(r)
        cur.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {stage} ORDER BY {order} {tail}")  # noqa: S608
        return cur.fetchall() if cur.description else []


def _write(
    model: type[models.Model], fields: list[models.Field], rows: Sequence[Sequence[Any]], order: str, tail: str
) -> list[Any]:
    """Run `INSERT INTO table (fields) <rows> <tail>`; rows sorted by `order` on PostgreSQL."""
    if _is_pg():
        return _pg_staged(model, fields, rows, order, tail)
    table = connection.ops.quote_name(model._meta.db_table)
    out: list[Any] = []
    with _cursor() as cur:
        for chunk in _chunks(rows, max(1, SQLITE_MAX_VARS // len(fields))):
            src, params = _values(fields, chunk)
            cur.execute(f"INSERT INTO {table} {src} {tail}", params)
            if cur.description:
                out.extend(cur.fetchall())
    return out


def _key(model: type[models.Model], names: Sequence[str]) -> str:
    qn = connection.ops.quote_name
    return ", ".join(qn(model._meta.get_field(n).column) for n in names)  # type: ignore[union-attr, arg-type]


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
    on = _key(model, conflict)
    tail = f"ON CONFLICT ({on}) DO NOTHING RETURNING {connection.ops.quote_name(returning)}"
    return [r[0] for r in _write(model, _columns(model, names), rows, on, tail)]


def insert_rows(model: type[models.Model], names: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert rows as they are (no conflict handling): a binary COPY on PostgreSQL, VALUES on SQLite."""
    if not rows:
        return
    if _is_pg():
        with copy_in(model, names) as write:
            for r in rows:
                write(r)
        return
    _write(model, _columns(model, names), rows, "", "")


def lock_scope(model: type[models.Model], value: str) -> None:
    """PostgreSQL: serialise this transaction with every other writer of `value` into `model`, until
    commit. (SQLite serialises all writers already.)"""
    if _is_pg():
        with _cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{model._meta.db_table}:{value}"])


def stored_idents(model: type[models.Model], scope: str, value: str, ident: str, idents: list[str]) -> set[str]:
    """Which of `idents` are stored with `scope` = value (one index probe each)."""
    qn = connection.ops.quote_name
    s_col, i_col = (qn(model._meta.get_field(n).column) for n in (scope, ident))  # type: ignore[union-attr, arg-type]
    with _cursor() as cur:
        cur.execute(
            f"SELECT {i_col} FROM {qn(model._meta.db_table)} WHERE {s_col} = %s AND {i_col} = ANY(%b::text[])",  # noqa: S608
            [value, idents],
        )
        return {r[0] for r in cur.fetchall()}


@contextmanager
def copy_in(model: type[models.Model], names: Sequence[str]) -> Iterator[Callable[[Sequence[Any]], None]]:
    """PostgreSQL binary COPY straight into the model's table; yields `write_row`.

    The server inserts the rows as they stream in, while the caller goes on preparing the next ones;
    a constraint violation is raised when the block exits.
    """
    qn = connection.ops.quote_name
    fields = _columns(model, names)
    cols = ", ".join(qn(f.column) for f in fields)  # type: ignore[arg-type]  # concrete fields have columns
    with _cursor() as cur, cur.copy(f"COPY {qn(model._meta.db_table)} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([_copy_type(f) for f in fields])
        yield copy.write_row


def upsert_add(
    model: type[models.Model],
    key: Sequence[str],
    add: Sequence[str],
    rows: Sequence[Sequence[Any]],
    greatest: Sequence[str] = (),
) -> None:
    """Insert rows (key + add + greatest columns); on a key conflict add each `add` value to the stored
    one and keep the larger of each `greatest` pair."""
    if not rows:
        return
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    on = _key(model, key)
    larger = "GREATEST" if _is_pg() else "MAX"  # SQLite's two-argument MAX is scalar
    sets = ", ".join(
        [f"{qn(n)} = {table}.{qn(n)} + excluded.{qn(n)}" for n in add]
        + [f"{qn(n)} = {larger}({table}.{qn(n)}, excluded.{qn(n)})" for n in greatest]
    )
    fields = _columns(model, [*key, *add, *greatest])
    _write(model, fields, rows, on, f"ON CONFLICT ({on}) DO UPDATE SET {sets}")


def upsert_replace(
    model: type[models.Model], key: Sequence[str], other: Sequence[str], rows: Sequence[Sequence[Any]]
) -> int:
    """Insert rows; on a key conflict overwrite the other columns (the same sample read twice)."""
    if not rows:
        return 0
    qn = connection.ops.quote_name
    fields = _columns(model, [*key, *other])
    on = _key(model, key)
    sets = ", ".join(f"{qn(f.column)} = excluded.{qn(f.column)}" for f in fields[len(key) :])  # type: ignore[arg-type]
    _write(model, fields, rows, on, f"ON CONFLICT ({on}) DO UPDATE SET {sets}")
    return len(rows)
