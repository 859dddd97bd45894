"""PostgreSQL: the raw events table partitioned by day (declarative RANGE partitions on ts, in UTC).

Partitions are named <table>_pYYYYMMDD and cover [day, day + 1). They are created ahead by the
storage beat task (telemetry.retention, TELEMETRY_PARTITIONS_AHEAD_DAYS), never by ingest: DDL on
the insert path would take locks on the parent in the middle of every writer's COPY, and two
ingests finding the same day missing would race to create it. A DEFAULT partition catches an
insert whose day has no partition yet (beat stopped for a week, a clock far off): ingest never
fails for want of a partition, and the next maintenance moves those rows into the day's own
partition (split) before attaching it. Retention drops whole partitions: no row-by-row DELETE,
no vacuum debt.

Primary key: Django keeps `id` as the model's primary key (lookups by id stay unique, the
identity sequence hands out each id once), while the table's real key is (id, ts), because a
unique index on a partitioned table must contain the partition key. Dedup lives in EventKey.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

TABLE = "telemetry_admissionevent"
DEFAULT = f"{TABLE}_default"
_NAME = re.compile(rf"^{TABLE}_p(\d{{8}})$")


def day_of(t: datetime) -> date:
    return t.astimezone(UTC).date()


def day_start(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def partition_name(d: date) -> str:
    return f"{TABLE}_p{d:%Y%m%d}"


def is_partitioned(cur: Any) -> bool:
    cur.execute("SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))", [TABLE])
    return bool(cur.fetchone()[0])


def partitions(cur: Any) -> dict[date, str]:
    """The daily partitions that exist: day → table name (the DEFAULT partition is not a day)."""
    cur.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
        [TABLE],
    )
    out = {}
    for (name,) in cur.fetchall():
        m = _NAME.match(name)
        if m:
            out[datetime.strptime(m.group(1), "%Y%m%d").replace(tzinfo=UTC).date()] = name
    return out


def ensure_day(cur: Any, d: date) -> bool:
    """Create day d's partition unless it exists; rows for d already in DEFAULT move into it.
    Returns whether a partition was created. Run inside a transaction: the split is all or nothing."""
    if d in partitions(cur):
        return False
    name, lo, hi = partition_name(d), day_start(d), day_start(d + timedelta(days=1))
    # Bounds are literals (DDL takes no bind parameters); they are formatted from dates, never input.
    cur.execute(f"SELECT EXISTS (SELECT 1 FROM {DEFAULT} WHERE ts >= %s AND ts < %s)", [lo, hi])  # noqa: S608
    if not cur.fetchone()[0]:
        cur.execute(f"CREATE TABLE {name} PARTITION OF {TABLE} FOR VALUES FROM ('{lo}') TO ('{hi}')")
        return True
    # Split: a new day's partition cannot be created while DEFAULT holds rows of that day.
    cur.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
    cur.execute(f"INSERT INTO {name} SELECT * FROM {DEFAULT} WHERE ts >= %s AND ts < %s", [lo, hi])  # noqa: S608
    cur.execute(f"DELETE FROM {DEFAULT} WHERE ts >= %s AND ts < %s", [lo, hi])  # noqa: S608
    cur.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM ('{lo}') TO ('{hi}')")
    return True


def default_days(cur: Any) -> list[date]:
    """Days that have rows waiting in the DEFAULT partition."""
    cur.execute(f"SELECT DISTINCT (ts AT TIME ZONE 'UTC')::date FROM {DEFAULT}")  # noqa: S608
    return sorted(r[0] for r in cur.fetchall())


def drop_before(cur: Any, cutoff: date) -> list[str]:
    """Drop every daily partition wholly before `cutoff` (its day < cutoff), and DEFAULT's rows before it."""
    dropped = []
    for d, name in sorted(partitions(cur).items()):
        if d < cutoff:
            cur.execute(f"DROP TABLE {name}")
            dropped.append(name)
    cur.execute(f"DELETE FROM {DEFAULT} WHERE ts < %s", [day_start(cutoff)])  # noqa: S608
    return dropped


def convert(cur: Any, days: list[date]) -> None:
    """Migration: the plain events table → the same table partitioned by day, rows and ids kept."""
    old = f"{TABLE}_unpartitioned"
    cur.execute(f"ALTER TABLE {TABLE} RENAME TO {old}")
    cur.execute(
        f"CREATE TABLE {TABLE} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY) "
        "PARTITION BY RANGE (ts)"
    )
    cur.execute(f"CREATE TABLE {DEFAULT} PARTITION OF {TABLE} DEFAULT")
    cur.execute(f"SELECT DISTINCT (ts AT TIME ZONE 'UTC')::date FROM {old}")  # noqa: S608
    for d in sorted({*days, *(r[0] for r in cur.fetchall())}):
        ensure_day(cur, d)
    cur.execute(f"INSERT INTO {TABLE} SELECT * FROM {old}")  # noqa: S608
    cur.execute(
        f"SELECT setval(pg_get_serial_sequence(%s, 'id'), COALESCE((SELECT MAX(id) FROM {old}), 0) + 1, false)",  # noqa: S608
        [TABLE],
    )
    cur.execute(f"DROP TABLE {old}")
    cur.execute(f"ALTER TABLE {TABLE} ADD PRIMARY KEY (id, ts)")


def unconvert(cur: Any) -> None:
    """Migration backwards: one plain table again, primary key id."""
    part = f"{TABLE}_partitioned"
    cur.execute(f"ALTER TABLE {TABLE} RENAME TO {part}")
    cur.execute(f"ALTER TABLE {part} DROP CONSTRAINT {TABLE}_pkey")
    cur.execute(f"CREATE TABLE {TABLE} (LIKE {part} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY)")
    cur.execute(f"INSERT INTO {TABLE} SELECT * FROM {part}")  # noqa: S608
    cur.execute(
        f"SELECT setval(pg_get_serial_sequence(%s, 'id'), COALESCE((SELECT MAX(id) FROM {part}), 0) + 1, false)",  # noqa: S608
        [TABLE],
    )
    cur.execute(f"DROP TABLE {part} CASCADE")
    cur.execute(f"ALTER TABLE {TABLE} ADD PRIMARY KEY (id)")
