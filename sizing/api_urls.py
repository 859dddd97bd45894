"""Sizing and trace routes, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from telemetry import sizing_api

urlpatterns = [
    path("sizing", sizing_api.SizingView.as_view(), name="api-sizing"),
    path("traces", sizing_api.TraceListView.as_view(), name="traces"),
    path("traces/<uuid:trace_id>", sizing_api.TraceDetailView.as_view(), name="trace-detail"),
]
