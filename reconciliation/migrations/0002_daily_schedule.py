"""Reconcile every day at 03:00 UTC, after the 02:00 forecast (django-celery-beat; edit or disable it in the admin)."""

from django.db import migrations

from config.beat import daily_at


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        daily_at("reconciliation: daily findings", "reconciliation.tasks.schedule_reconciliation", hour=3)
    ]
