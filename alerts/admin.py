"""Operators see and edit rules, episodes, endpoints and the delivery log in the admin too."""

from django.contrib import admin

from alerts.models import AlertEpisode, AlertRule, Notification, WebhookDelivery, WebhookEndpoint


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "scope", "tenant", "pool", "kind", "threshold", "window_minutes", "enabled")
    list_filter = ("scope", "kind", "enabled")


@admin.register(AlertEpisode)
class AlertEpisodeAdmin(admin.ModelAdmin):
    list_display = ("rule", "subject_key", "summary", "opened_at", "resolved_at")
    list_filter = ("rule",)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("user", "kind", "title", "created_at", "read_at", "emailed_at")
    list_filter = ("kind",)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "tenant", "url", "enabled")
    exclude = ("secret",)  # shown to the endpoint's managers on its page, not in lists


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("event_type", "event_id", "endpoint", "attempt", "status", "status_code", "next_attempt_at")
    list_filter = ("status", "event_type")
