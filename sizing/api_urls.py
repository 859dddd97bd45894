"""Sizing and trace routes, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from sizing import api

urlpatterns = [
    path("sizing", api.SizingView.as_view(), name="api-sizing"),
    path("traces", api.TraceListView.as_view(), name="traces"),
    path("traces/<uuid:trace_id>", api.TraceDetailView.as_view(), name="trace-detail"),
]
