"""Telemetry's own non-API route: the Prometheus scrape endpoint, mounted at the root by config/urls.py."""

from django.urls import path

from telemetry.metrics_view import MetricsView

urlpatterns = [
    path("metrics", MetricsView.as_view(), name="metrics"),
]
