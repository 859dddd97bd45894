"""Admin: the dead-letter quarantine, so an operator can read what a pipeline gave up on and clear it."""

from __future__ import annotations

from django.contrib import admin

from telemetry.models import DeadLetter, PoolAlert


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
