"""Issue 21.1: events partitioned by day (PostgreSQL), retention by whole UTC days, dedup across both.

Every test runs on both backends; on PostgreSQL they also look at which partition holds what.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from telemetry import partitions
from telemetry.models import AdmissionEvent, DayRollup, EventKey, HourRollup, MinuteRollup
from telemetry.retention import cutoff_day, maintain
from telemetry.services import ingest_events
from tests.telemetry.helpers import T0, event

US = timedelta(microseconds=1)


def _pg() -> bool:
    return connection.vendor == "postgresql"


def _where() -> dict[str, str]:
    """event_id → the partition that holds it (PostgreSQL)."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT event_id, tableoid::regclass::text FROM {partitions.TABLE}")  # noqa: S608
        return dict(cur.fetchall())


def _at(n: int, ts: datetime, **kw) -> dict:
    return event(n, ts=ts.isoformat(), **kw)


def _sums(model) -> list[tuple]:
    return sorted(model.objects.values_list("bucket", "requests", "estimated_wt"))


def test_ingest_dedup_and_rollups_across_midnight(fleet):
    midnight = partitions.day_start(T0.date() + timedelta(days=1))
    late, early = midnight - US, midnight
    first = ingest_events(source="gw", events=[_at(1, late), _at(2, early)])
    assert (first.accepted, first.duplicates) == (2, 0)
    before = [_sums(m) for m in (MinuteRollup, HourRollup, DayRollup)]
    # A replay of both, and a batch with one replay (the other day's) and one new event
    again = ingest_events(source="gw", events=[_at(2, early), _at(1, late)])
    mixed = ingest_events(source="gw", events=[_at(1, late), _at(3, early + timedelta(minutes=1))])
    assert (again.accepted, again.duplicates) == (0, 2)
    assert (mixed.accepted, mixed.duplicates) == (1, 1)
    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r1", "r2", "r3"]
    assert EventKey.objects.count() == 3
    minutes, hours, days = (_sums(m) for m in (MinuteRollup, HourRollup, DayRollup))
    assert days == [(midnight - timedelta(days=1), 1, 100.0), (midnight, 2, 200.0)]
    assert hours == [(midnight - timedelta(hours=1), 1, 100.0), (midnight, 2, 200.0)]
    assert minutes == [
        (midnight - timedelta(minutes=1), 1, 100.0),
        (midnight, 1, 100.0),
        (midnight + timedelta(minutes=1), 1, 100.0),
    ]
    assert [b[:2] for b in before[2]] == [(midnight - timedelta(days=1), 1), (midnight, 1)]
    if _pg():
        day_before = partitions.partition_name(late.date())
        assert _where() == {"r1": day_before, "r2": partitions.partition_name(early.date()), "r3": _where()["r2"]}


def _rollup(model, bucket: datetime) -> None:
    model.objects.create(
        bucket=bucket, tenant="acme", model="llama-test", region="us-test", traffic_class="reserved",
        decision="admit", requests=1,
    )  # fmt: skip


def test_retention_drops_exactly_the_expired_days(fleet, settings):
    settings.TELEMETRY_TS_MAX_AGE_S = 60 * 86400  # let ingest take events from before the cutoff
    settings.TELEMETRY_DEDUP_RETENTION_DAYS = 70
    now = timezone.now()
    keep_from = cutoff_day(now, settings.TELEMETRY_EVENT_RETENTION_DAYS)
    edge = partitions.day_start(keep_from)
    if _pg():
        with connection.cursor() as cur:  # two expired days with partitions; the kept edge day lands in DEFAULT
            for d in (keep_from - timedelta(days=2), keep_from - timedelta(days=1)):
                partitions.ensure_day(cur, d)
    batch = [_at(1, edge - timedelta(days=1)), _at(2, edge - US), _at(3, edge), _at(4, edge + timedelta(hours=23))]
    assert ingest_events(source="gw", events=batch).accepted == 4
    if _pg():
        assert _where()["r3"] == partitions.DEFAULT
    old_hour = partitions.day_start(cutoff_day(now, settings.TELEMETRY_HOUR_ROLLUP_RETENTION_DAYS))
    _rollup(HourRollup, old_hour - timedelta(hours=1))
    _rollup(HourRollup, old_hour)

    done = maintain(now)

    assert sorted(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r3", "r4"]
    assert EventKey.objects.count() == 4  # keys outlive the events
    minute_buckets = set(MinuteRollup.objects.values_list("bucket", flat=True))
    assert minute_buckets == {edge, edge + timedelta(hours=23)}  # minutes: the same 35 days as events
    assert DayRollup.objects.filter(bucket__lt=edge).exists()  # days: two years
    assert set(
        HourRollup.objects.filter(bucket__lt=old_hour + timedelta(hours=1)).values_list("bucket", flat=True)
    ) == {old_hour}
    if _pg():
        assert done.dropped == [partitions.partition_name(keep_from - timedelta(days=i)) for i in (2, 1)]
        assert partitions.partition_name(keep_from) in done.created  # split out of DEFAULT
        assert _where() == {"r3": partitions.partition_name(keep_from), "r4": partitions.partition_name(keep_from)}
        with connection.cursor() as cur:
            days = partitions.partitions(cur)
        assert min(days) == keep_from
        assert max(days) == partitions.day_of(now) + timedelta(days=settings.TELEMETRY_PARTITIONS_AHEAD_DAYS)
    else:
        assert done.deleted["events"] == 2


def test_a_replayed_expired_event_is_a_duplicate_while_its_key_lasts_then_refused_for_its_ts(fleet, settings):
    """An event whose row retention dropped: while its key is kept it is a duplicate (nothing stored,
    nothing counted); past the plausible window it is refused by validation. Never stored twice."""
    settings.TELEMETRY_TS_MAX_AGE_S = 60 * 86400
    settings.TELEMETRY_DEDUP_RETENTION_DAYS = 70  # ≥ the window: what config.settings enforces
    now = timezone.now()
    old = partitions.day_start(cutoff_day(now, settings.TELEMETRY_EVENT_RETENTION_DAYS)) - timedelta(hours=1)
    assert ingest_events(source="gw", events=[_at(7, old)]).accepted == 1
    maintain(now)
    assert not AdmissionEvent.objects.exists()  # the event is past retention
    rollups = [_sums(m) for m in (HourRollup, DayRollup)]

    replay = ingest_events(source="gw", events=[_at(7, old)])

    assert (replay.accepted, replay.duplicates, replay.errors) == (0, 1, [])
    assert not AdmissionEvent.objects.exists()
    assert [_sums(m) for m in (HourRollup, DayRollup)] == rollups
    # With the production window (7 days) the same replay is a bad event, named by its ts
    settings.TELEMETRY_TS_MAX_AGE_S = 7 * 86400
    refused = ingest_events(source="gw", events=[_at(7, old)])
    assert (refused.accepted, [e["field"] for e in refused.errors]) == (0, ["ts"])
    assert [_sums(m) for m in (HourRollup, DayRollup)] == rollups


@pytest.mark.postgres
def test_an_insert_for_a_day_without_partition_lands_in_default_and_is_split_out(fleet, settings):
    settings.TELEMETRY_TS_MAX_AGE_S = 60 * 86400
    day = (datetime.now(UTC) - timedelta(days=20)).date()  # older than the migration's partitions
    assert ingest_events(source="gw", events=[_at(1, partitions.day_start(day) + timedelta(hours=5))]).accepted == 1
    assert _where() == {"r1": partitions.DEFAULT}
    done = maintain()
    assert partitions.partition_name(day) in done.created
    assert _where() == {"r1": partitions.partition_name(day)}
    # and a replay is still a duplicate, whichever partition its event moved to
    assert ingest_events(source="gw", events=[_at(1, partitions.day_start(day) + timedelta(hours=5))]).duplicates == 1
