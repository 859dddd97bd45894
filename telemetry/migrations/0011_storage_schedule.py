"""Hourly telemetry upkeep: event partitions ahead, retention of events, rollups and dedup keys (issue 21)."""

from django.db import migrations

from config.beat import every_seconds


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0010_partition_events"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        every_seconds(
            "telemetry: event partitions ahead, retention of events, rollups and keys",
            "telemetry.tasks.maintain_storage",
            3600,
        )
    ]
