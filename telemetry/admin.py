"""Admin: the dead-letter quarantine, so an operator can read what a pipeline gave up on and clear it."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q

from telemetry.models import DeadLetter, GatewayUsageSample, PoolAlert, PrometheusSource
from telemetry.prom_presets import job_of


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    list_display = ("stage", "key", "attempts", "last_failed_at", "short_error")
    list_filter = ("stage",)
    search_fields = ("key", "error")
    readonly_fields = ("stage", "key", "payload", "error", "created_at", "last_failed_at", "attempts")

    @admin.display(description="error")
    def short_error(self, obj: DeadLetter) -> str:
        return obj.error[:120]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # rows come from pipelines only; an operator reads and deletes them


@admin.register(PoolAlert)
class PoolAlertAdmin(admin.ModelAdmin):
    """Alertmanager's alerts as received (issue 24); unbound ones (no known pool) are filtered by `pool`."""

    list_display = ("alertname", "kind", "state", "pool", "pool_label", "starts_at", "ends_at")
    list_filter = ("kind", "state", ("pool", admin.EmptyFieldListFilter))
    search_fields = ("alertname", "pool_label", "fingerprint")
    readonly_fields = [f.name for f in PoolAlert._meta.fields]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # rows come from Alertmanager only


@admin.register(PrometheusSource)
class PrometheusSourceAdmin(admin.ModelAdmin):
    """Where an operator adds a Prometheus to pull from and picks its preset (vLLM, Hyperion, Atlas, or own queries).

    The Atlas preset's key map is checked on save (PrometheusSource.clean): each bad line is an atlas_map error.
    """

    list_display = ("name", "base_url", "preset", "job", "enabled", "last_pulled_at", "last_error", "unbound_alerts")
    list_filter = ("preset", "enabled")
    fields = ("name", "base_url", "enabled", "preset", "job", "rate_window", "pool_label", "queries", "atlas_map",
              "step_s", "overlap_s", "initial_lookback_s", "last_pulled_at", "last_error", "unbound_alerts",
              "replicas_are")  # fmt: skip
    readonly_fields = ("last_pulled_at", "last_error", "unbound_alerts", "replicas_are")

    @admin.display(description="unbound alerts")
    def unbound_alerts(self, obj: PrometheusSource) -> int:
        """Alerts naming this source's job (or service) that reached no pool: a pool label naming no pool,
        or none and no pool_label `=<pool>` to bind them (telemetry.alertmanager)."""
        job = job_of(obj)
        if not job:
            return 0
        return PoolAlert.objects.filter(pool__isnull=True).filter(Q(labels__job=job) | Q(labels__service=job)).count()

    @admin.display(description="replicas are")
    def replicas_are(self, obj: PrometheusSource) -> str:
        if obj.preset != "hyperion":
            return "as the queries count them"
        return (f"scrape targets of job {job_of(obj)} (up), not replicas: Hyperion's prometheus.yml scrapes one "
                "Service address, so 1/1 means the Service answers; list each replica as a target to count them")  # fmt: skip


@admin.register(GatewayUsageSample)
class GatewayUsageSampleAdmin(admin.ModelAdmin):
    """Atlas gateway usage per tenant and step (issue 24), as the Atlas preset pulled it."""

    list_display = ("ts", "tenant", "project", "model", "region", "requests", "tokens", "quota_rejections",
                    "rate_limit_rejections", "source")  # fmt: skip
    list_filter = ("source", "tenant")
    date_hierarchy = "ts"
    readonly_fields = [f.name for f in GatewayUsageSample._meta.fields]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # rows come from the Atlas preset's pulls only
