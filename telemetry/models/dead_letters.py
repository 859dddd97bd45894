"""Units of work a pipeline gave up on, kept for an operator."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models


class DeadLetter(models.Model):
    """A unit of work a pipeline (ingest, fold, event sink, task) gave up on, kept for an operator.

    A pipeline never stalls on one bad row: after its bounded retries it quarantines the unit here
    (telemetry.deadletter.dead_letter) and goes on with the rest. The same (stage, key) failing
    again counts up `attempts` rather than adding a row.
    """

    stage = models.CharField(max_length=64, help_text="which pipeline gave up, e.g. fold, ingest_task, admission_sink")
    key = models.CharField(max_length=200, help_text="what it gave up on, e.g. the hour of a backlog row")
    payload = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    error = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    last_failed_at = models.DateTimeField(auto_now=True)
    attempts = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-last_failed_at"]
        constraints = [models.UniqueConstraint(fields=["stage", "key"], name="deadletter_unique_stage_key")]

    def __str__(self) -> str:
        return f"{self.stage}:{self.key}"
