"""Fold the minute rollups into hours and days every 30 s (django-celery-beat's database scheduler)."""

from django.db import migrations

from config.beat import every_seconds


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0005_rollup_backlog"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [every_seconds("telemetry: fold minute rollups into hours and days", "telemetry.tasks.fold_rollups", 30)]
