"""Event ingest: validate, store what is new, add exactly that to the minute rollups — one
transaction a batch (hours and days are folded from the minutes: telemetry.fold).

On PostgreSQL the batch streams into a binary COPY straight into the events table while Python
validates the next chunk and sums the rollups: the server inserts the rows on its own core in the
meantime, so ingest costs about what the COPY costs plus the rollup upsert. Dedup is EventKey's unique
(source, event_id) index (the events table is partitioned by day and cannot hold a unique index
without ts), written by a second, narrow COPY in the same savepoint under a per-source advisory
lock: when it refuses a key (a replay), the savepoint is rolled back with the events copied in it,
the batch's ids are probed among the keys and only the new rows and keys copied. So the
rollups only ever see rows this transaction inserted, and a replayed or concurrently delivered
event is counted once. SQLite: the keys INSERT … ON CONFLICT DO NOTHING RETURNING, the new events
inserted, then the same rollups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from telemetry import metrics
from telemetry.columns import CLEANED, FIELDS, Columns, clean_columns, rows_to_columns, take
from telemetry.envelopes import Envelopes, envelopes_for
from telemetry.fold import fold_if_due
from telemetry.models import AdmissionEvent, EventKey
from telemetry.rollups import add_minutes, minute_deltas
from telemetry.sql import copy_in, insert_ignore_returning, insert_rows, lock_scope, stored_idents
from telemetry.validation import Catalogue, FieldError, clean_event, has_control

# The stored columns: who sent it and when it was stored, around the cleaned fields.
EVENT_COLUMNS = ("source", *FIELDS[:2], "received_at", *FIELDS[2:])
# The dedup key of each stored event (telemetry.models.EventKey).
KEY_COLUMNS = ("source", "event_id", "ts")
# Small enough that the server starts inserting early, large enough that the per-chunk checks stay cheap.
CHUNK = 2048


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "errors": self.errors}


def check_source(source: Any) -> str:
    if not isinstance(source, str) or not source or len(source) > 64 or has_control(source):
        raise ValueError(
            "source: required, a string of at most 64 characters without control characters or lone surrogates"
        )
    return source


def _clean_chunk(chunk: list[Any], offset: int, cat: Catalogue, result: IngestResult) -> Columns | None:
    cols = clean_columns(chunk, cat)
    if cols is not None:
        return cols
    rows = []
    for i, raw in enumerate(chunk, start=offset):
        try:
            rows.append(clean_event(raw, cat))
        except FieldError as exc:
            result.errors.append({"index": i, "field": exc.field, "message": exc.message})
    return rows_to_columns(rows) if rows else None


class _Batch:
    """The batch's good events, by column, first occurrence of each event_id only."""

    def __init__(self, source: str, now: Any, cat: Catalogue, envelopes: Envelopes) -> None:
        self.source, self.now, self.cat, self.envelopes = source, now, cat, envelopes
        self.cols: Columns = {f: [] for f in CLEANED}
        self.seen: set[str] = set()
        self.repeats = 0
        self.streamed = 0  # events validated so far

    def add(self, cols: Columns) -> Columns:
        ids = cols["event_id"]
        fresh = set(ids)
        if len(fresh) != len(ids) or not self.seen.isdisjoint(fresh):
            keep = []
            for i, k in enumerate(ids):
                if k not in self.seen:
                    self.seen.add(k)
                    keep.append(i)
            self.repeats += len(ids) - len(keep)
            cols = take(cols, keep)
        else:
            self.seen |= fresh
        for f in CLEANED:
            self.cols[f].extend(cols[f])
        return cols

    def rows(self, cols: Columns) -> Iterator[tuple]:
        """EVENT_COLUMNS-ordered rows of `cols`."""
        n = len(cols["event_id"])
        head = (repeat(self.source, n), cols["event_id"], cols["ts"], repeat(self.now, n))
        return zip(*head, *(cols[c] for c in EVENT_COLUMNS[4:]), strict=True)


def _stream(events: list[Any], batch: _Batch, result: IngestResult, write: Callable[[Sequence[Any]], None]) -> None:
    """Validate the events not yet validated, chunk by chunk, writing each chunk's new rows.
    No queries in here: on PostgreSQL the connection is busy with the COPY."""
    for start in range(batch.streamed, len(events), CHUNK):
        cols = _clean_chunk(events[start : start + CHUNK], start, batch.cat, result)
        batch.streamed = start + CHUNK
        if cols is not None:
            for row in batch.rows(batch.add(cols)):
                write(row)


def _discard(row: Sequence[Any]) -> None:
    pass


def _key_rows(batch: _Batch) -> Iterator[tuple]:
    """EventKey rows (source, event_id, ts) of the batch's events."""
    cols = batch.cols
    return zip(repeat(batch.source), cols["event_id"], cols["ts"])


def _store_pg(events: list[Any], batch: _Batch, result: IngestResult) -> dict:
    from psycopg.errors import UniqueViolation

    lock_scope(AdmissionEvent, batch.source)
    try:
        # a savepoint: a refused key COPY takes the events COPY back with it and leaves the transaction usable
        with transaction.atomic():
            with copy_in(AdmissionEvent, EVENT_COLUMNS) as write:
                _stream(events, batch, result, write)
                deltas = minute_deltas(batch.cols, batch.envelopes)  # while the server works through the COPY
            with copy_in(EventKey, KEY_COLUMNS) as write_key:
                for key in _key_rows(batch):
                    write_key(key)
        return deltas
    except UniqueViolation:
        _stream(events, batch, result, _discard)  # in case the refusal came before the last chunk
    stored = stored_idents(EventKey, "source", batch.source, "event_id", batch.cols["event_id"])
    batch.cols = take(batch.cols, [i for i, k in enumerate(batch.cols["event_id"]) if k not in stored])
    with copy_in(AdmissionEvent, EVENT_COLUMNS) as write:
        for row in batch.rows(batch.cols):
            write(row)
    with copy_in(EventKey, KEY_COLUMNS) as write_key:
        for key in _key_rows(batch):
            write_key(key)
    return minute_deltas(batch.cols, batch.envelopes)


def _store_sqlite(events: list[Any], batch: _Batch, result: IngestResult) -> dict:
    rows: list[Sequence[Any]] = []
    _stream(events, batch, result, rows.append)
    inserted = insert_ignore_returning(
        EventKey, KEY_COLUMNS, list(_key_rows(batch)), ("source", "event_id"), "event_id"
    )
    if len(inserted) != len(rows):
        new = set(inserted)
        keep = [i for i, k in enumerate(batch.cols["event_id"]) if k in new]
        batch.cols = take(batch.cols, keep)
        rows = [rows[i] for i in keep]
    insert_rows(AdmissionEvent, EVENT_COLUMNS, rows)
    return minute_deltas(batch.cols, batch.envelopes)


def ingest_events(*, source: str, events: list[dict[str, Any]]) -> IngestResult:
    """Validate, store the new events and add only those to the rollups, in one transaction.

    Each bad event is reported by index and field; the good ones in the batch are kept. A repeat of
    a stored event, or of an earlier one in the same batch, counts as a duplicate.
    """
    source = check_source(source)
    result = IngestResult()
    now = timezone.now()
    if not events:
        return result
    batch = _Batch(source, now, Catalogue.for_events(events, now), envelopes_for(events))
    with transaction.atomic():
        store = _store_pg if connection.vendor == "postgresql" else _store_sqlite
        add_minutes(store(events, batch, result))
    valid = len(batch.seen)
    result.accepted = len(batch.cols["event_id"])
    result.duplicates = batch.repeats + valid - result.accepted
    metrics.observe_ingest(source, batch.cols["ts"], now)
    fold_if_due()
    return result
