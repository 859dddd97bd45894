"""Admin: the dead-letter quarantine, so an operator can read what a pipeline gave up on and clear it."""

from __future__ import annotations

from django.contrib import admin

from telemetry.models import DeadLetter


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
