"""Prometheus servers to pull from, and the usage evidence an Atlas gateway's pull records."""

from __future__ import annotations

from django.db import models

from entitlements.models import Tenant
from telemetry.prom_presets import default_queries, queries_of


class PrometheusSource(models.Model):
    """A Prometheus server to pull fleet samples from, one query per FleetSample field."""

    name = models.SlugField(max_length=64, unique=True)
    base_url = models.URLField(max_length=300, help_text="e.g. http://prometheus:9090")
    enabled = models.BooleanField(default=True)
    preset = models.CharField(
        max_length=16,
        choices=[
            ("custom", "custom (the queries below)"),
            ("vllm", "vLLM + DCGM"),
            ("hyperion", "Hyperion"),
            ("atlas", "Atlas"),
        ],
        default="custom",
        help_text="a preset's queries replace the ones below when pulled (telemetry.prom_presets)",
    )
    job = models.CharField(max_length=100, blank=True, default="", help_text="the `job` label a preset selects")
    rate_window = models.CharField(
        max_length=8, default="1m", help_text="PromQL range of a preset's rate()s: at least 4 scrape intervals"
    )
    queries = models.JSONField(default=default_queries)
    atlas_map = models.TextField(
        blank=True,
        default="",
        help_text="Atlas preset: which tenant, project, model and region each API key serves; CSV api_key,tenant,project,model,region, one key a line",
    )
    pool_label = models.CharField(max_length=64, default="pool", help_text="label whose value is the pool slug")
    step_s = models.PositiveIntegerField(default=15)
    overlap_s = models.PositiveIntegerField(default=120, help_text="re-read this much before last_pulled_at")
    initial_lookback_s = models.PositiveIntegerField(default=600)
    last_pulled_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True, help_text="a pull in progress holds the source")
    last_error = models.TextField(blank=True, default="")
    last_duration_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The admin's check of a preset's job and rate window (telemetry.prom_presets)."""
        from django.core.exceptions import ValidationError

        try:
            queries_of(self)
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            raise ValidationError({field: message}) from None
        if self.preset == "atlas":
            from telemetry.atlas_map import parse_atlas_map

            owners, errors = parse_atlas_map(self.atlas_map)
            if errors:
                raise ValidationError({"atlas_map": errors})
            if not owners:
                raise ValidationError({"atlas_map": "the Atlas preset needs at least one api_key line"})


class GatewayUsageSample(models.Model):
    """Usage evidence from an Atlas gateway (issue 24): one pull step of a mapped owner's keys, summed.

    Counts are per step: the preset's rate over its rate_window × step_s. A re-read of the same step
    overwrites its row (the unique key), as fleet samples do.
    """

    source = models.ForeignKey(PrometheusSource, on_delete=models.CASCADE, related_name="usage_samples")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="gateway_usage")
    project = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=64, blank=True, default="")
    region = models.CharField(max_length=64, blank=True, default="")
    ts = models.DateTimeField()
    step_s = models.PositiveIntegerField()
    requests = models.FloatField(default=0)
    tokens = models.FloatField(default=0)
    quota_rejections = models.FloatField(default=0)
    rate_limit_rejections = models.FloatField(default=0)

    class Meta:
        ordering = ["-ts"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "tenant", "project", "model", "region", "ts"], name="gateway_usage_unique_step"
            )
        ]
        indexes = [models.Index(fields=["tenant", "ts"], name="gateway_usage_tenant_ts")]

    def __str__(self) -> str:
        return f"{self.tenant_id}@{self.ts:%Y-%m-%dT%H:%M:%S}"
