"""Evaluate alert rules every minute and send due webhook retries every 15 s (django-celery-beat;
edit or disable them in the admin)."""

from django.db import migrations

from config.beat import every_seconds


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        every_seconds("alerts: evaluate alert rules", "alerts.tasks.evaluate_rules", 60),
        every_seconds("alerts: send due webhook deliveries", "alerts.tasks.deliver_due_webhooks", 15),
    ]
