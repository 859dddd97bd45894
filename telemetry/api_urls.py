"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from telemetry import alertmanager, api, charges_api, statement_api

urlpatterns = [
    path("telemetry/events", api.EventsIngestView.as_view(), name="telemetry-events"),
    path("telemetry/history", api.HistoryImportView.as_view(), name="telemetry-history"),
    path("telemetry/fleet", api.FleetIngestView.as_view(), name="telemetry-fleet"),
    path("telemetry/alertmanager", alertmanager.AlertmanagerWebhookView.as_view(), name="telemetry-alertmanager"),
    path("usage", api.UsageView.as_view(), name="usage"),
    path("charges", charges_api.ChargesView.as_view(), name="charges"),
    path("entitlements/<uuid:uuid>/statement", statement_api.StatementView.as_view(), name="entitlement-statement"),
]
