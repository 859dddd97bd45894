"""Sweep the delivery log and read inbox rows past retention every day at 03:30 UTC."""

from django.db import migrations

from config.beat import daily_at


class Migration(migrations.Migration):
    dependencies = [("alerts", "0002_schedules")]

    operations = [daily_at("alerts: sweep old deliveries and read notifications", "alerts.tasks.sweep_alerts", hour=3, minute=30)]
