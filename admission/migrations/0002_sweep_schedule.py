"""Settle abandoned reservations every 30 s (django-celery-beat; edit or disable it in the admin)."""

from django.db import migrations

from config.beat import every_seconds


class Migration(migrations.Migration):
    dependencies = [
        ("admission", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [every_seconds("admission: settle abandoned reservations", "admission.tasks.sweep_expired", 30)]
