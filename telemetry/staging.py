"""PostgreSQL ingest through one staging table: a batch's cleaned events are COPYed (binary) into a
session temp table, then moved on set-based, in one statement:

    keys:   INSERT INTO EventKey SELECT … FROM stage ORDER BY event_id COLLATE "C" ON CONFLICT DO NOTHING …
    events: INSERT INTO the events table SELECT … FROM stage JOIN (the keys just inserted)
    answer: the staged event_ids whose key was already stored (usually none)

(tried first without ON CONFLICT and the join, in a savepoint, as if every key were new: see move_staged).

Dedup is exact across the events' partitions and under concurrency: EventKey's primary key (source,
event_id) decides, and a writer that meets another's uncommitted key waits for it to commit
and then skips it. Keys are inserted in event_id byte order, so two writers of overlapping batches take
the index's row locks in one order and never deadlock. The events table only ever receives rows
whose key this statement inserted, so the rollups (summed from the same rows) count each event once.

The stage is a temp table (no WAL, local buffers) and holds only what varies by event: the source
and the time the batch was received are one value each, bound once into the INSERT.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from telemetry.models import AdmissionEvent, EventKey
from telemetry.sql import _copy_type, _cursor

STAGE = "telemetry_ingest_stage"
# The two protections of dedup under concurrency (tests/telemetry/test_concurrency.py takes each out):
# a stored or concurrently inserted key is skipped, not an error; keys are locked in one order.
ON_CONFLICT = "ON CONFLICT (source, event_id) DO NOTHING"
# Any one total order keeps writers from deadlocking; byte order ("C") is the cheapest to sort by: the
# database's own collation (C.UTF-8, en_US…) goes through strcoll and sorts without abbreviated keys
# (a batch's keys insert measured 4.1 → 3.1 ms per 1,000 events, the sort 0.8 → 0.4).
KEY_ORDER = 'ORDER BY event_id COLLATE "C"'


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


def _cols(names: Sequence[str]) -> str:
    return ", ".join(_qn(n) for n in names)


# Always staged: the keys insert and the replay answer read them from the stage.
ALWAYS_STAGED = ("event_id", "ts")


def _one_value(col: list[Any]) -> bool:
    """Every value equal to the first, and that value bindable once without changing what is stored:
    not a float (0.0 == -0.0, and a float8 column keeps the sign)."""
    first = col[0]
    return type(first) is not float and col.count(first) == len(col)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


class Stage:
    """A batch's cleaned columns into the stage by binary COPY, all but the ones that hold one value in
    every row put so far: those are bound once into the move (the bench's batches: 8 of 22 columns;
    psycopg's write_row and the server's COPY cost by the field). Decided on the first chunk; a later
    chunk that breaks a column's one value ends the COPY, writes the value into the rows already staged
    (UPDATE) and goes on with a COPY that carries the column."""

    def __init__(self, cur: Any, names: Sequence[str], stack: ExitStack) -> None:
        self.cur, self.names, self.stack = cur, names, stack
        self.types = {n: AdmissionEvent._meta.get_field(n).db_type(connection) for n in names}
        self.constants: dict[str, Any] | None = None  # None until the first chunk
        self.staged: list[str] = list(names)
        self._copy: ExitStack | None = None
        self._write: Callable[[Sequence[Any]], None] | None = None

    def _start(self) -> None:
        copy = self._copy = self.stack.enter_context(ExitStack())  # an error inside fails the COPY
        self.staged = [n for n in self.names if n not in (self.constants or {})]
        cols = _cols(self.staged)
        stream = copy.enter_context(self.cur.copy(f"COPY {STAGE} ({cols}) FROM STDIN (FORMAT BINARY)"))  # noqa: S608
        stream.set_types([_copy_type(AdmissionEvent._meta.get_field(n)) for n in self.staged])  # type: ignore[arg-type]
        self._write = stream.write_row

    def _widen(self, names: list[str]) -> None:
        """`names` vary after all: give the rows staged so far their one value, and stage them from here."""
        assert self._copy is not None and self.constants is not None  # noqa: S101 - after the first chunk
        self._copy.close()
        sets = ", ".join(f"{_qn(n)} = {self.bound(n)}" for n in names)
        self.cur.execute(f"UPDATE {STAGE} SET {sets}", self.params())  # noqa: S608 - model metadata
        for n in names:
            del self.constants[n]
        self._start()

    def put(self, cols: dict[str, list[Any]]) -> None:
        """Stage a chunk's rows (columns by name, each as long as the others)."""
        if not cols[self.names[0]]:
            return
        if self.constants is None:
            self.constants = {n: cols[n][0] for n in self.names if n not in ALWAYS_STAGED and _one_value(cols[n])}
            self._start()
        else:
            varied = [n for n, v in self.constants.items() if not (_one_value(c := cols[n]) and _same(c[0], v))]
            if varied:
                self._widen(varied)
        write = self._write
        assert write is not None  # noqa: S101 - _start ran
        for row in zip(*(cols[n] for n in self.staged), strict=True):
            write(row)

    def bound(self, name: str) -> str:
        """SQL for a constant column: its bound value, typed as the events table's column."""
        return f"CAST(%(k_{name})s AS {self.types[name]})"

    def params(self) -> dict[str, Any]:
        return {f"k_{n}": v for n, v in (self.constants or {}).items()}

    def select(self, alias: str) -> str:
        """The stage's `names` in order, for INSERT … SELECT: staged columns read, constants bound."""
        consts = self.constants or {}
        return ", ".join(self.bound(n) if n in consts else f"{alias}.{_qn(n)}" for n in self.names)


@contextmanager
def stage_copy(names: Sequence[str]) -> Iterator[Stage]:
    """An empty stage with the events table's `names` columns, and a binary COPY into it; yields the
    Stage, whose `put` takes chunks. The server files the rows while the caller prepares the next ones."""
    table = _qn(AdmissionEvent._meta.db_table)
    with _cursor() as cur, ExitStack() as stack:
        # ON COMMIT DELETE ROWS keeps a finished batch from lingering; the DELETE covers several batches
        # in one caller's transaction. Not TRUNCATE: that gives the table a new file every batch
        # (measured 3.3-3.5 ms wall, 0.4 ms server CPU each; a DELETE of the empty stage 0.15 / 0.02)
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ON COMMIT DELETE ROWS "  # noqa: S608 - model metadata
            f"AS SELECT {_cols(names)} FROM {table} WITH NO DATA"
        )
        cur.execute(f"DELETE FROM {STAGE}")  # noqa: S608 - a module constant
        yield Stage(cur, names, stack)


def _move(sql: str, params: dict[str, Any]) -> list[str]:
    with _cursor() as cur:
        cur.execute(sql, params)
        return [r[0] for r in cur.fetchall()] if cur.description else []


def move_staged(stage: Stage, source: str, received_at: datetime) -> list[str]:
    """Insert the staged events whose (source, event_id) is not stored yet, with their keys; returns
    the staged event_ids that were already stored (replays).

    First as if every key were new: a plain insert of the keys (ON CONFLICT's speculative insertion
    costs the server about half as much again per key, measured by bench/ingest.py's CPU split) and of
    every staged event, in a savepoint. A stored or concurrently stored key makes the primary key
    refuse the statement whole; the savepoint takes it back and the exact statement runs: keys ON
    CONFLICT DO NOTHING, and only the events whose key it inserted."""
    from psycopg.errors import UniqueViolation

    # identifiers from model metadata and this module's constants; values are bound
    events, keys = _qn(AdmissionEvent._meta.db_table), _qn(EventKey._meta.db_table)
    names, params = stage.names, {"source": source, "received_at": received_at, **stage.params()}
    into_keys = f"INSERT INTO {keys} (source, event_id, ts) SELECT %(source)s, event_id, ts FROM {STAGE} {KEY_ORDER}"  # noqa: S608
    into_events = f"INSERT INTO {events} (source, received_at, {_cols(names)}) SELECT %(source)s, %(received_at)s, {stage.select('s')}"
    try:
        with transaction.atomic():
            _move(f"WITH new AS ({into_keys}) {into_events} FROM {STAGE} s", params)
        return []
    except UniqueViolation:
        pass
    exact = f"""
        WITH new AS ({into_keys} {ON_CONFLICT} RETURNING event_id),
        stored AS ({into_events} FROM {STAGE} s JOIN new n ON n.event_id = s.event_id)
        SELECT s.event_id FROM {STAGE} s LEFT JOIN new n ON n.event_id = s.event_id WHERE n.event_id IS NULL
    """  # noqa: S608
    return _move(exact, params)
