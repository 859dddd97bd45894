"""Hour and day rollups are folded from the minute rollups: late until a fold, then exact, idempotent,
and safe while ingest runs alongside."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Sum

from telemetry.fold import fold, fold_if_due
from telemetry.models import DayRollup, HourRollup, MinuteRollup, RollupBacklog
from telemetry.services import ingest_events
from telemetry.tasks import fold_rollups
from tests.telemetry.helpers import T0, event


def _total(model, **filters):
    return model.objects.filter(**filters).aggregate(n=Sum("requests"))["n"] or 0


def _by_hour(model):
    return dict(model.objects.values_list("bucket").annotate(n=Sum("requests")).order_by())


@pytest.fixture
def lagging(settings):
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    fold()  # this process has just folded: ingest leaves hours and days to the next fold


def test_ingest_writes_minutes_and_notes_hours_until_a_fold(fleet, lagging):
    ingest_events(source="gw", events=[event(i) for i in range(120)])  # 12:00–12:01:59
    assert _total(MinuteRollup) == 120
    assert (_total(HourRollup), _total(DayRollup)) == (0, 0)
    assert set(RollupBacklog.objects.values_list("hour", flat=True)) == {T0}
    assert fold_rollups() == 1
    assert (_total(HourRollup), _total(DayRollup)) == (120, 120)
    assert not RollupBacklog.objects.exists()
    assert fold() == 0  # nothing noted: nothing recomputed


def test_fold_replaces_rather_than_adds(fleet, lagging):
    ingest_events(source="gw", events=[event(i) for i in range(10)])
    fold()
    RollupBacklog.objects.create(hour=T0)  # noted twice, or folded twice: the same sums
    fold()
    assert (_total(HourRollup), _total(DayRollup)) == (10, 10)
    hour = HourRollup.objects.get()
    minute_sums = MinuteRollup.objects.aggregate(est=Sum("estimated_wt"), p=Sum("prompt_tokens"))
    assert (hour.estimated_wt, hour.prompt_tokens) == (minute_sums["est"], minute_sums["p"])


def test_a_late_event_refolds_only_its_own_hour_and_day(fleet, lagging):
    yesterday = (T0 - timedelta(days=1)).isoformat()
    ingest_events(source="gw", events=[event(i) for i in range(30)])
    fold()
    ingest_events(source="gw", events=[event(1000, ts=yesterday)])
    assert set(RollupBacklog.objects.values_list("hour", flat=True)) == {T0 - timedelta(days=1)}
    assert fold() == 1
    assert _by_hour(HourRollup) == {T0 - timedelta(days=1): 1, T0: 30}
    assert _by_hour(DayRollup) == {
        (T0 - timedelta(days=1)).replace(hour=0): 1,
        T0.replace(hour=0): 30,
    }


def test_ingest_folds_when_the_last_fold_is_older_than_the_setting(fleet, settings):
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    fold()
    assert fold_if_due() == 0
    ingest_events(source="gw", events=[event(1)])
    assert _total(HourRollup) == 0
    settings.TELEMETRY_FOLD_EVERY_S = 0
    ingest_events(source="gw", events=[event(2)])
    assert _total(HourRollup) == 2


@pytest.mark.postgres
def test_folds_running_alongside_ingest_lose_nothing(transactional_db, fleet, settings):
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    fold()
    stop = threading.Event()
    errors = []

    def writer(w):
        try:
            for b in range(15):
                base = w * 100_000 + b * 200
                ingest_events(
                    source=f"gw-{w}",
                    events=[event(base + i, ts=(T0 + timedelta(seconds=b * 240 + i)).isoformat()) for i in range(200)],
                )
        except Exception as exc:  # asserted below
            errors.append(exc)
        finally:
            connection.close()

    def folder():
        try:
            while not stop.is_set():
                fold()
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    f = threading.Thread(target=folder)
    f.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    f.join()
    assert errors == []
    fold()
    n = 3 * 15 * 200
    assert (_total(MinuteRollup), _total(HourRollup), _total(DayRollup)) == (n, n, n)
    assert _by_hour(HourRollup) == {
        h: _total(MinuteRollup, bucket__gte=h, bucket__lt=h + timedelta(hours=1)) for h in _by_hour(HourRollup)
    }


def test_beat_folds_every_30_seconds(db):
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(task="telemetry.tasks.fold_rollups")
    assert (task.enabled, task.interval.every, task.interval.period) == (True, 30, "seconds")
