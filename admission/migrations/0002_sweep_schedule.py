"""Settle abandoned reservations every 30 s (django-celery-beat; edit or disable it in the admin).

Every schedule in the project lives in the database this way, so operators change them in one place.
"""

from django.db import migrations

TASK = "admission.tasks.sweep_expired"
NAME = "admission: settle abandoned reservations"


def forwards(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=30, period="seconds")
    PeriodicTask.objects.update_or_create(name=NAME, defaults={"task": TASK, "interval": every, "enabled": True})


def backwards(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("admission", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
