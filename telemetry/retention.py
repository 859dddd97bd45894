"""Telemetry storage upkeep (the hourly beat task `telemetry.tasks.maintain_storage`): partitions ahead,
old data out.

Every retention counts whole UTC days back from today's midnight: with N days, rows of the N days
before today (and today's) stay, older days go. PostgreSQL drops the events' daily partitions;
SQLite (and a PostgreSQL table not yet partitioned) deletes the same rows, so both keep the same
events. Rollups and dedup keys are deleted by their own settings on both.

Dedup keys (EventKey) outlive the events by the plausible-timestamp window (settings check it):
ingest refuses any event older than TELEMETRY_TS_MAX_AGE_S by validation, so a replay of an event
is either still found among the keys (a duplicate, counted once) or refused for its ts; it can
never be stored a second time, whatever retention has dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from telemetry import partitions
from telemetry.models import AdmissionEvent, DayRollup, EventKey, HourRollup, MinuteRollup


@dataclass
class Upkeep:
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    deleted: dict[str, int] = field(default_factory=dict)


def cutoff_day(now: datetime, days: int) -> date:
    """The oldest UTC day kept under a retention of `days` days."""
    return partitions.day_of(now) - timedelta(days=days)


def _delete_before(model: type[models.Model], column: str, day: date) -> int:
    # QuerySet.delete() on these models (no relations, no signals) is one DELETE statement.
    return model.objects.filter(**{f"{column}__lt": partitions.day_start(day)}).delete()[0]  # type: ignore[attr-defined]  # each has objects


def _partitioned() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cur:
        return partitions.is_partitioned(cur)


def _lock(take: bool) -> bool:
    """One upkeep at a time on PostgreSQL (a session lock: the steps commit one by one)."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cur:
        fn = "pg_try_advisory_lock" if take else "pg_advisory_unlock"
        cur.execute(f"SELECT {fn}(hashtext('telemetry:upkeep'))")
        return bool(cur.fetchone()[0])


def _partitions(now: datetime, out: Upkeep) -> None:
    """Each partition change in its own short transaction: DDL locks the parent only briefly."""
    today = partitions.day_of(now)
    keep_from = cutoff_day(now, settings.TELEMETRY_EVENT_RETENTION_DAYS)
    with connection.cursor() as cur:
        waiting = [d for d in partitions.default_days(cur) if d >= keep_from]
    wanted = [today + timedelta(days=i) for i in range(settings.TELEMETRY_PARTITIONS_AHEAD_DAYS + 1)]
    for d in sorted({*wanted, *waiting}):
        with transaction.atomic(), connection.cursor() as cur:
            if partitions.ensure_day(cur, d):
                out.created.append(partitions.partition_name(d))
    with transaction.atomic(), connection.cursor() as cur:
        out.dropped = partitions.drop_before(cur, keep_from)


def maintain(now: datetime | None = None) -> Upkeep:
    """Create the coming days' partitions, split DEFAULT, and apply every retention setting."""
    now = now or timezone.now()
    out = Upkeep()
    if not _lock(True):
        return out  # another upkeep is running
    try:
        if _partitioned():
            _partitions(now, out)
        else:
            days = settings.TELEMETRY_EVENT_RETENTION_DAYS
            out.deleted["events"] = _delete_before(AdmissionEvent, "ts", cutoff_day(now, days))
        keys_from = cutoff_day(now, settings.TELEMETRY_DEDUP_RETENTION_DAYS)
        out.deleted["event_keys"] = _delete_before(EventKey, "ts", keys_from)
        for model, days in (
            (MinuteRollup, settings.TELEMETRY_MINUTE_ROLLUP_RETENTION_DAYS),
            (HourRollup, settings.TELEMETRY_HOUR_ROLLUP_RETENTION_DAYS),
            (DayRollup, settings.TELEMETRY_DAY_ROLLUP_RETENTION_DAYS),
        ):
            out.deleted[model._meta.model_name] = _delete_before(  # type: ignore[index]  # a concrete model has a name
                model, "bucket", cutoff_day(now, days)
            )
    finally:
        _lock(False)
    return out
