"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from forecasting import api

urlpatterns = [
    path("forecasts", api.ForecastsView.as_view(), name="api-forecasts"),
    path("forecasts/runs", api.RunsView.as_view(), name="api-forecast-runs"),
    path("forecasts/runs/<uuid:run_id>", api.RunDetailView.as_view(), name="api-forecast-run"),
    path("supply-gap", api.SupplyGapView.as_view(), name="api-supply-gap"),
    path("cost", api.CostView.as_view(), name="api-cost"),
]
