"""Schedule the Prometheus pull every 30 s (django-celery-beat's database scheduler)."""

from django.db import migrations

from config.beat import every_seconds


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [every_seconds("telemetry: pull Prometheus sources", "telemetry.tasks.pull_prometheus_sources", 30)]
