"""Hour and day rollups, folded from the minute rollups rather than added to on every ingest.

Ingest adds each batch to the minute rollups and notes the hours it touched (RollupBacklog) in
the same transaction. A fold takes the noted hours and recomputes each of them from its minutes,
then each of their days from its hours, replacing the stored sums: idempotent, exact, and as
fresh as the last fold (every 30 s by Celery beat, and from ingest itself when the last fold in
this process is older than TELEMETRY_FOLD_EVERY_S). Ingest thus writes one level, not three.

Why it is exact under concurrency: a backlog row becomes visible in the same commit as its
minutes, so a fold that takes a row sees those minutes too (each statement of a READ COMMITTED
transaction reads a fresh snapshot); a row committed after the fold read the backlog stays for the
next fold. Backlog rows are only inserted and deleted, so writers never queue on them, and folds
take a transaction-scoped advisory lock so two of them never interleave.

No single bad row stops a fold: each hour and each day is folded in its own savepoint, and one that
raises (an hour at the edge of the calendar, a sum out of range) is rolled back alone, quarantined
(telemetry.deadletter, stage "fold") and taken out of the backlog; the rest is folded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.utils.dateparse import parse_datetime

from telemetry.deadletter import dead_letter
from telemetry.models import ROLLUP_ADDITIVE, ROLLUP_KEY, ROLLUP_MAX, DayRollup, HourRollup, MinuteRollup, RollupBacklog

_last_fold = 0.0


def note_hours(buckets: Iterable[datetime]) -> None:
    """Record, in the caller's transaction, the hours whose minute rollups this transaction changed."""
    hours = {b.replace(minute=0, second=0, microsecond=0) for b in buckets}
    RollupBacklog.objects.bulk_create([RollupBacklog(hour=h) for h in sorted(hours)])


def _lock() -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite runs one write transaction at a time
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_xact_lock(hashtext('telemetry:fold'))")
        return bool(cur.fetchone()[0])


def _as_hour(raw: Any) -> datetime:
    h = parse_datetime(raw) if isinstance(raw, str) else raw  # SQLite hands back its text form, naive UTC
    if not isinstance(h, datetime):
        raise ValueError(f"not a timestamp: {raw!r}")
    return h if h.tzinfo else h.replace(tzinfo=UTC)


def _take_backlog() -> list[datetime]:
    table = connection.ops.quote_name(RollupBacklog._meta.db_table)
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {table} RETURNING hour")  # noqa: S608 - model metadata
        got = [r[0] for r in cur.fetchall()]
    out = set()
    for raw in set(got):
        try:
            out.add(_as_hour(raw))
        except (ValueError, TypeError, OverflowError) as exc:
            dead_letter(stage="fold", key=f"backlog {raw!s:.150}", payload={"hour": str(raw)}, error=repr(exc))
    return sorted(out)


def _quarantined(level: str, start: datetime, fold_one: Callable[[], None]) -> bool:
    """Run `fold_one` in a savepoint; when it raises, roll it back alone and dead-letter it."""
    try:
        with transaction.atomic():
            fold_one()
    except Exception as exc:  # noqa: BLE001 - whatever broke this unit must not stop the others
        dead_letter(stage="fold", key=f"{level} {start.isoformat()}", payload={level: start}, error=repr(exc))
        return False
    return True


def _replace(target: type[models.Model], source: type[models.Model], start: datetime, end: datetime) -> None:
    """target's rows at bucket `start` := the sums of source's rows in [start, end), per key."""
    qn = connection.ops.quote_name
    keys = [qn(k) for k in ROLLUP_KEY[1:]]
    sums = [qn(c) for c in ROLLUP_ADDITIVE + ROLLUP_MAX]
    folds = [f"SUM({c})" for c in sums[: len(ROLLUP_ADDITIVE)]] + [f"MAX({c})" for c in sums[len(ROLLUP_ADDITIVE) :]]
    bucket = qn("bucket")
    # `imported` (issue 47, telemetry.history_import): an hour folded from minutes is live; a day is
    # imported only when every hour of it for that key was.
    imported = qn("imported")
    whole = "BOOL_AND" if connection.vendor == "postgresql" else "MIN"
    from_source = f"{whole}({imported})" if source is HourRollup else "FALSE"
    cols = ", ".join([bucket, *keys, *sums, imported])
    prep = target._meta.get_field("bucket").get_db_prep_value  # type: ignore[union-attr]
    sql = (
        f"INSERT INTO {qn(target._meta.db_table)} ({cols}) "  # noqa: S608 - model metadata
        f"SELECT %s, {', '.join(keys)}, {', '.join(folds)}, {from_source} "
        f"FROM {qn(source._meta.db_table)} WHERE {bucket} >= %s AND {bucket} < %s "
        f"GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)} "
        f"ON CONFLICT ({bucket}, {', '.join(keys)}) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in [*sums, imported])
    )
    with connection.cursor() as cur:
        cur.execute(sql, [prep(t, connection, prepared=False) for t in (start, start, end)])


def _replace_span(target: type[models.Model], start: datetime, span: timedelta) -> None:
    source = MinuteRollup if target is HourRollup else HourRollup
    _replace(target, source, start, start + span)  # OverflowError at the calendar's edge: quarantined


def refold_days(days: Iterable[datetime]) -> None:
    """Each day's rollups := the sums of its hours (after hours were written directly: an import)."""
    for d in sorted(set(days)):
        _replace_span(DayRollup, d, timedelta(days=1))


def fold() -> int:
    """Fold the noted hours (and their days) from the minute rollups; returns how many hours."""
    global _last_fold
    with transaction.atomic():
        if not _lock():
            return 0  # another fold is running; what it does not take stays noted
        hours = _take_backlog()
        folded = [
            h for h in hours if _quarantined("hour", h, partial(_replace_span, HourRollup, h, timedelta(hours=1)))
        ]
        for d in sorted({h.replace(hour=0) for h in folded}):
            _quarantined("day", d, partial(_replace_span, DayRollup, d, timedelta(days=1)))
    _last_fold = time.monotonic()
    return len(folded)


def fold_if_due() -> int:
    """Fold when this process last folded longer than TELEMETRY_FOLD_EVERY_S ago (0: every time)."""
    if time.monotonic() - _last_fold < settings.TELEMETRY_FOLD_EVERY_S:
        return 0
    return fold()
