"""The abstract run row: status, who holds it, their last checkpoint, how often it was claimed."""

from __future__ import annotations

from django.db import models


class ClaimedRun(models.Model):
    """A job row claimed by one worker at a time (runs.claims).

    A worker takes a QUEUED run with a compare-and-set `update()`; while it works it moves
    `heartbeat_at` forward; a redelivered task takes a RUNNING run over only once that heartbeat is
    older than the subclass's staleness setting (`STALE_AFTER_SETTING`, seconds), i.e. its worker died.
    Every write the claimant makes is conditional on still holding the claim, so a run finishes once.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED)
    # The setting (seconds without a checkpoint) after which a RUNNING claim may be taken over.
    STALE_AFTER_SETTING = ""

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="the claimant's last checkpoint; a stale one lets a redelivery re-claim"
    )
    attempts = models.PositiveIntegerField(default=0, help_text="claims taken, including re-claims")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        abstract = True

    @property
    def is_done(self) -> bool:
        return self.status in self.TERMINAL
