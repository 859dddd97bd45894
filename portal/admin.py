"""Read-mostly admin for launch requests: the state moves only through the services."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from portal.models import LaunchRequest, LaunchRequestEvent, LaunchRequestRegion


class RegionInline(admin.TabularInline):
    model = LaunchRequestRegion
    extra = 0
    readonly_fields = ["region", "approved_cu", "entitlement"]
    can_delete = False


class EventInline(admin.TabularInline):
    model = LaunchRequestEvent
    extra = 0
    readonly_fields = ["at", "actor", "transition", "from_state", "to_state", "comment", "changes"]
    can_delete = False


@admin.register(LaunchRequest)
class LaunchRequestAdmin(admin.ModelAdmin):
    list_display = ["title", "tenant", "model", "state", "launch_date", "created_by", "updated_at"]
    list_filter = ["state", "traffic_class", "model", "tenant"]
    search_fields = ["title", "uuid"]
    readonly_fields = ["uuid", "state", "submitted_at", "decided_by", "decided_at", "created_at", "updated_at"]
    inlines = [RegionInline, EventInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # filing goes through the portal so the event and the checks happen


@admin.register(LaunchRequestEvent)
class LaunchRequestEventAdmin(admin.ModelAdmin):
    list_display = ["request", "transition", "from_state", "to_state", "actor", "at"]
    list_filter = ["transition"]
    readonly_fields = [f.name for f in LaunchRequestEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
