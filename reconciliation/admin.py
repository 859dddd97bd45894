"""Read-only admin views: findings change through services (accept / dismiss, with who and why), not here."""

from django.contrib import admin

from reconciliation.models import Finding, PoolReview, ReconciliationRun


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(ReconciliationRun)
class ReconciliationRunAdmin(_ReadOnly):
    list_display = ("id", "status", "trigger", "window_end", "entitlements_read", "findings_written", "created_at")
    list_filter = ("status", "trigger")


@admin.register(Finding)
class FindingAdmin(_ReadOnly):
    list_display = ("kind", "state", "tenant", "pool", "cu_delta", "created_at", "acted_by")
    list_filter = ("kind", "state", "pool")


@admin.register(PoolReview)
class PoolReviewAdmin(_ReadOnly):
    list_display = ("pool", "opened_at", "closed_at", "finding")
    list_filter = ("pool",)
