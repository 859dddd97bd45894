"""Alertmanager alerts bound to pools (telemetry.alertmanager)."""

from __future__ import annotations

from django.db import models

from entitlements.models import Pool


class PoolAlert(models.Model):
    """One Alertmanager alert (telemetry.alertmanager), kept per (fingerprint, startsAt): one firing episode.

    Bound to a pool by its pool label (ALERTMANAGER_POOL_LABEL); an alert naming no known pool is kept
    unbound (pool null, `pool_label` says what it named) so an operator can see it. Supply alerts
    (ALERTMANAGER_SUPPLY_ALERTS) take replicas out of the pool's health while firing; load alerts are
    evidence only (reconciliation reads them through telemetry.selectors.pool_alerts).
    """

    class Kind(models.TextChoices):
        SUPPLY = "supply", "supply"
        LOAD = "load", "load"

    class State(models.TextChoices):
        FIRING = "firing", "firing"
        RESOLVED = "resolved", "resolved"

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="alerts")
    pool_label = models.CharField(max_length=200, blank=True, default="", help_text="the pool label's value as sent")
    fingerprint = models.CharField(max_length=64)
    alertname = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    state = models.CharField(max_length=8, choices=State.choices)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True, help_text="set when resolved (or when Alertmanager sent one)")
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    generator_url = models.CharField(max_length=2000, blank=True, default="")
    receiver = models.CharField(max_length=200, blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="poolalert_unique_episode"),
        ]
        indexes = [models.Index(fields=["pool", "state"], name="poolalert_pool_state")]

    def __str__(self) -> str:
        return f"{self.alertname} ({self.state}) on {self.pool_label or '-'}"
