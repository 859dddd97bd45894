"""Run the forecast every day at 02:00 UTC (django-celery-beat; edit or disable it in the admin)."""

from django.db import migrations

TASK = "forecasting.tasks.schedule_forecast"
NAME = "forecasting: daily demand forecast"


def forwards(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    at_two, _ = CrontabSchedule.objects.get_or_create(
        minute="0", hour="2", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.update_or_create(
        name=NAME, defaults={"task": TASK, "crontab": at_two, "interval": None, "enabled": True, "kwargs": "{}"}
    )


def backwards(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("forecasting", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
