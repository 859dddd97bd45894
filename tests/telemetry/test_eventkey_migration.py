"""Migration 0018 (EventKey's (source, event_id) becomes its primary key, issue 35.6) migrates a database
that holds keys: on SQLite by rebuilding the table, on PostgreSQL in place. The keys are kept, dedup
still refuses a replay of a key stored before it, and going back restores the old table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from telemetry.models import AdmissionEvent, EventKey
from telemetry.services import ingest_events
from tests.telemetry.helpers import T0, event

BEFORE = ("telemetry", "0017_rollup_sources")
KEYS = [("gw", "r1", T0), ("gw", "r2", T0 + timedelta(seconds=1)), ("other", "r1", T0)]


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return executor.loader.project_state(target).apps


def _leaf():
    return ("telemetry", MigrationExecutor(connection).loader.graph.leaf_nodes("telemetry")[0][1])


def _columns():
    with connection.cursor() as cur:
        # sorted: PostgreSQL adds a column back at the end, SQLite's rebuild puts it first
        return sorted(c.name for c in connection.introspection.get_table_description(cur, "telemetry_eventkey"))


def _check_migration():
    leaf = _leaf()
    try:
        old = _migrate(BEFORE).get_model("telemetry", "EventKey")
        old.objects.bulk_create([old(source=s, event_id=e, ts=ts) for s, e, ts in KEYS])
        assert _columns() == ["event_id", "id", "source", "ts"]
        _migrate(leaf)
        assert _columns() == ["event_id", "source", "ts"]
        assert sorted(EventKey.objects.values_list("source", "event_id", "ts")) == sorted(KEYS)
        # the primary key refuses a second (source, event_id); the same event_id of another source is new
        with pytest.raises(IntegrityError), transaction.atomic():
            EventKey.objects.create(source="gw", event_id="r1", ts=T0)
        result = ingest_events(source="gw", events=[event(1), event(3)])
        assert (result.accepted, result.duplicates) == (1, 1)
        assert list(AdmissionEvent.objects.values_list("event_id", flat=True)) == ["r3"]
        assert EventKey.objects.count() == 4
        # and back: the identity column and the unique constraint again, every key kept
        back = _migrate(BEFORE).get_model("telemetry", "EventKey")
        assert _columns() == ["event_id", "id", "source", "ts"]
        assert back.objects.count() == 4
        with pytest.raises(IntegrityError), transaction.atomic():
            back.objects.create(source="gw", event_id="r3", ts=T0)
    finally:
        _migrate(leaf)


@pytest.mark.django_db(transaction=True)
def test_the_primary_key_migration_keeps_the_keys(fleet):
    _check_migration()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_primary_key_migration_keeps_the_keys_on_postgresql(fleet):
    assert connection.vendor == "postgresql"
    _check_migration()
