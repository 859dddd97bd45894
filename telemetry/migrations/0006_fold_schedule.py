"""Fold the minute rollups into hours and days every 30 s (django-celery-beat's database scheduler)."""

from django.db import migrations

TASK = "telemetry.tasks.fold_rollups"
NAME = "telemetry: fold minute rollups into hours and days"


def forwards(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=30, period="seconds")
    PeriodicTask.objects.update_or_create(name=NAME, defaults={"task": TASK, "interval": every, "enabled": True})


def backwards(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0005_rollup_backlog"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
