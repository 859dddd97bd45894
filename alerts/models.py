"""Alert rules and their episodes, the inbox, and signed webhooks with their delivery log.

An episode is one stretch of time in which a rule held for one subject (an entitlement, a tenant's
scope, a pool). People hear about an episode once, when it opens; it fires again only after it
resolved. The database keeps that true: one open episode per rule and subject (a partial unique
constraint), so two evaluations racing each other open it once.
"""

from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from entitlements.models import Pool, Tenant

# Every message lands in the inbox (it is the record); a rule chooses which of these it also uses.
CHANNELS = ("email", "webhook")


def default_channels() -> list[str]:
    return ["email", "webhook"]


def new_secret() -> str:
    return secrets.token_hex(32)


class AlertRule(models.Model):
    class Scope(models.TextChoices):
        TENANT = "tenant", "One tenant"
        POOL = "pool", "One pool"
        PLATFORM = "platform", "Whole platform"

    class Kind(models.TextChoices):
        USE_OVER_BOUGHT = "use_over_bought", "Use over X % of bought"
        TENANT_THROTTLES_OVER = "tenant_throttles_over", "Tenant throttles over Y % of requests"
        PLATFORM_THROTTLES = "platform_throttles", "Platform throttles (more than the threshold)"
        LATENCY_MISSES = "latency_misses", "Latency SLO misses (more than the threshold)"
        ENVELOPE_DRIFT = "envelope_drift", "Envelope drift"
        SUPPLY_GAP_ORDER_BY = "supply_gap_order_by_within", "Supply-gap order-by date within N days, or late"
        FORECAST_RUN_FAILED = "forecast_run_failed", "A forecast run failed"
        BUDGET_USED = "budget_used", "Period budget used over X % (and again when spent)"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=120)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="alert_rules")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="alert_rules")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    threshold = models.FloatField(
        default=0,
        help_text="% for use and tenant throttles; a count for platform throttles and latency misses "
        "(fires above it); days for the order-by date; % of the envelope's p50 for drift",
    )
    window_minutes = models.PositiveIntegerField(default=15, help_text="how far back telemetry is read")
    enabled = models.BooleanField(default=True)
    channels = models.JSONField(default=default_channels, help_text="besides the inbox: any of email, webhook")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["scope", "name"]
        constraints = [
            # A rule's scope names exactly the object it watches, so who hears about it follows from the row.
            models.CheckConstraint(
                condition=(Q(scope="tenant", tenant__isnull=False, pool__isnull=True))
                | (Q(scope="pool", pool__isnull=False, tenant__isnull=True))
                | (Q(scope="platform", tenant__isnull=True, pool__isnull=True)),
                name="alertrule_scope_matches_target",
            ),
            models.CheckConstraint(
                condition=Q(window_minutes__gte=1, window_minutes__lte=1440), name="alertrule_window_range"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class AlertEpisode(models.Model):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="episodes")
    subject_key = models.CharField(max_length=200, help_text="what the rule held for: an entitlement, a pool, …")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    summary = models.CharField(max_length=300)
    detail = models.JSONField(default=dict, help_text="the numbers that made it fire")
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "subject_key"],
                condition=Q(resolved_at__isnull=True),
                name="alertepisode_one_open_per_subject",
            )
        ]

    def __str__(self) -> str:
        return f"{self.rule_id}:{self.subject_key} {'open' if self.resolved_at is None else 'resolved'}"


class Notification(models.Model):
    """One inbox row for one person."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=64, help_text="alert.opened, launch_request.approved, …")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=300, blank=True)
    # SET_NULL: sweeping an old episode must not take an unread inbox row with it
    episode = models.ForeignKey(AlertEpisode, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read_at"], name="notification_user_unread")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.title}"


class WebhookEndpoint(models.Model):
    """A tenant's endpoint (hears its tenant's alerts and launch requests) or an operators' one
    (tenant empty: hears pool and platform alerts)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="webhooks")
    name = models.CharField(max_length=120)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128, default=new_secret, help_text="HMAC-SHA256 key for the signature")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} → {self.url}"


class WebhookDelivery(models.Model):
    """One attempt to deliver one event to one endpoint: the delivery log.

    A failed attempt that may be retried schedules the next attempt as a new row (`pending`, with
    `next_attempt_at` after an exponential backoff); the last allowed attempt that fails is `failed`.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        DELIVERED = "delivered", "Delivered"
        RETRIED = "retried", "Failed, retry scheduled"
        FAILED = "failed", "Failed, gave up"

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField()
    event_type = models.CharField(max_length=64)
    payload = models.JSONField()
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField()
    attempted_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-next_attempt_at", "-attempt"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event_id", "attempt"], name="webhookdelivery_one_per_attempt")
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="webhookdelivery_due")]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} #{self.attempt} {self.status}"
