"""Run the forecast every day at 02:00 UTC (django-celery-beat; edit or disable it in the admin)."""

from django.db import migrations

from config.beat import daily_at


class Migration(migrations.Migration):
    dependencies = [
        ("forecasting", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [daily_at("forecasting: daily demand forecast", "forecasting.tasks.schedule_forecast", hour=2)]
