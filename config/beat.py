"""Celery beat schedules as data migrations: every schedule lives in django-celery-beat's tables, so
operators see, edit and disable them in one place (the admin). A migration calls one of these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import migrations

RunPythonFn = Callable[[Any, Any], None]


def _schedule(name: str, task: str, make: Callable[[Any], dict[str, Any]]) -> migrations.RunPython:
    def forwards(apps: Any, schema_editor: Any) -> None:
        PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
        PeriodicTask.objects.update_or_create(name=name, defaults={"task": task, "enabled": True, **make(apps)})

    def backwards(apps: Any, schema_editor: Any) -> None:
        apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=name).delete()

    return migrations.RunPython(forwards, backwards)


def every_seconds(name: str, task: str, seconds: int) -> migrations.RunPython:
    def make(apps: Any) -> dict[str, Any]:
        IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
        every, _ = IntervalSchedule.objects.get_or_create(every=seconds, period="seconds")
        return {"interval": every}

    return _schedule(name, task, make)


def daily_at(name: str, task: str, *, hour: int, minute: int = 0) -> migrations.RunPython:
    def make(apps: Any) -> dict[str, Any]:
        CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
        at, _ = CrontabSchedule.objects.get_or_create(
            minute=str(minute), hour=str(hour), day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
        )
        return {"crontab": at, "interval": None, "kwargs": "{}"}

    return _schedule(name, task, make)
