"""Event ingest: validate, store what is new, add exactly that to the minute rollups — one
transaction a batch (hours and days are folded from the minutes: telemetry.fold).

Validation is by column (telemetry.columns), chunk by chunk; a chunk holding a bad event goes through
the row validator, which names each bad event's index and field while its good events go on.

PostgreSQL: the cleaned chunks stream into one binary COPY into a staging table while the next chunk
is validated, and one set-based statement inserts the new keys into EventKey and the events whose key
was new into the partitioned events table (telemetry.staging). The rollup sums are computed meanwhile
over every staged event, in a second thread, since nearly every batch is all new; when the statement
reports replays, they are taken out and the sums computed again over what was stored. So the rollups
only ever see rows this transaction inserted, and a replayed or concurrently delivered event is
counted once. Elsewhere (SQLite): the keys INSERT … ON CONFLICT DO NOTHING RETURNING, the new events
inserted, then the same rollups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from telemetry.sql import insert_ignore_returning, insert_rows
from telemetry.staging import move_staged, stage_copy
from telemetry.validation import Catalogue, FieldError, clean_event, has_control

# The stored columns: who sent it and when it was stored, around the cleaned fields.
EVENT_COLUMNS = ("source", *FIELDS[:2], "received_at", *FIELDS[2:])
# The dedup key of each stored event (telemetry.models.EventKey).
KEY_COLUMNS = ("source", "event_id", "ts")
# Small enough that the server starts filing rows early, large enough that the per-chunk checks stay cheap.
CHUNK = 2048

Store = Callable[[list[Any], "_Batch", "IngestResult"], dict]


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

    def drop(self, ids: Sequence[str]) -> None:
        """Take out the events with these ids (stored before: replays)."""
        gone = set(ids)
        self.cols = take(self.cols, [i for i, k in enumerate(self.cols["event_id"]) if k not in gone])

    def rows(self, cols: Columns) -> Iterator[tuple]:
        """EVENT_COLUMNS-ordered rows of `cols`."""
        n = len(cols["event_id"])
        head = (repeat(self.source, n), cols["event_id"], cols["ts"], repeat(self.now, n))
        return zip(*head, *(cols[c] for c in EVENT_COLUMNS[4:]), strict=True)


def _stream(
    events: list[Any], batch: _Batch, result: IngestResult, write: Callable[[Sequence[Any]], None] | None = None
) -> None:
    """Validate the batch chunk by chunk, writing each chunk's FIELDS-ordered new rows as it goes.
    No queries in here: on PostgreSQL the connection is busy with the COPY."""
    for start in range(0, len(events), CHUNK):
        cols = _clean_chunk(events[start : start + CHUNK], start, batch.cat, result)
        if cols is not None:
            cols = batch.add(cols)
            if write is not None:
                for row in zip(*(cols[f] for f in FIELDS), strict=True):
                    write(row)


def _store_staged(events: list[Any], batch: _Batch, result: IngestResult) -> dict:
    """PostgreSQL: one COPY into the stage, one statement out of it (telemetry.staging)."""
    with stage_copy(FIELDS) as write:
        _stream(events, batch, result, write)
    if not batch.cols["event_id"]:
        return {}
    # The sums are numpy and C-level passes; the thread runs while this one waits on the server.
    with ThreadPoolExecutor(max_workers=1) as pool:
        summing = pool.submit(minute_deltas, batch.cols, batch.envelopes)
        replays = move_staged(FIELDS, batch.source, batch.now)
        deltas = summing.result()
    if not replays:
        return deltas
    batch.drop(replays)
    return minute_deltas(batch.cols, batch.envelopes)


def _key_rows(batch: _Batch) -> Iterator[tuple]:
    """EventKey rows (source, event_id, ts) of the batch's events."""
    cols = batch.cols
    return zip(repeat(batch.source), cols["event_id"], cols["ts"])


def _store_portable(events: list[Any], batch: _Batch, result: IngestResult) -> dict:
    """Any database (SQLite's path): the keys inserted, skipping the stored ones, then their events."""
    _stream(events, batch, result)
    inserted = insert_ignore_returning(
        EventKey, KEY_COLUMNS, list(_key_rows(batch)), ("source", "event_id"), "event_id"
    )
    if len(inserted) != len(batch.cols["event_id"]):
        new = set(inserted)
        batch.drop([k for k in batch.cols["event_id"] if k not in new])
    insert_rows(AdmissionEvent, EVENT_COLUMNS, list(batch.rows(batch.cols)))
    return minute_deltas(batch.cols, batch.envelopes)


def _store() -> Store:
    return _store_staged if connection.vendor == "postgresql" else _store_portable


def ingest_events(*, source: str, events: list[dict[str, Any]], store: Store | None = None) -> IngestResult:
    """Validate, store the new events and add only those to the rollups, in one transaction.

    Each bad event is reported by index and field; the good ones in the batch are kept. A repeat of
    a stored event, or of an earlier one in the same batch, counts as a duplicate. `store`: the
    database's own path unless given (tests hold the staged and the portable path to one answer).
    """
    source = check_source(source)
    result = IngestResult()
    now = timezone.now()
    if not events:
        return result
    batch = _Batch(source, now, Catalogue.for_events(events, now), envelopes_for(events))
    with transaction.atomic():
        add_minutes((store or _store())(events, batch, result))
    valid = len(batch.seen)
    result.accepted = len(batch.cols["event_id"])
    result.duplicates = batch.repeats + valid - result.accepted
    metrics.observe_ingest(source, batch.cols["ts"], now)
    fold_if_due()
    return result
