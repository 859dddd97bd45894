"""PostgreSQL: the raw events table becomes a table partitioned by day on ts (telemetry.partitions),
its rows and ids kept; primary key (id, ts). SQLite keeps its plain table (retention deletes rows)."""

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import migrations


def _days():
    # Today back over the plausible-ts window, and the days ahead: ingest's whole range from the start.
    today = datetime.now(UTC).date()
    back = int(settings.TELEMETRY_TS_MAX_AGE_S // 86400) + 1
    return [today + timedelta(days=i) for i in range(-back, settings.TELEMETRY_PARTITIONS_AHEAD_DAYS + 1)]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from telemetry import partitions

    with schema_editor.connection.cursor() as cur:
        partitions.convert(cur, _days())


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from telemetry import partitions

    with schema_editor.connection.cursor() as cur:
        partitions.unconvert(cur)


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0009_event_keys")]

    operations = [migrations.RunPython(forwards, backwards)]
