"""Live pages and the portal's /metrics (mounted at the root by portal/urls.py)."""

from django.urls import path

from portal.views import live, metrics, statement

urlpatterns = [
    path("fleet/", live.fleet, name="live-fleet"),
    path("entitlements/<uuid:uuid>/", live.entitlement, name="live-entitlement"),
    path("entitlements/<uuid:uuid>/statement/", statement.page, name="entitlement-statement-page"),
    path("entitlements/<uuid:uuid>/statement.csv", statement.export, name="entitlement-statement-csv"),
    path("usage/", live.usage, name="live-usage"),
    path("usage/export.csv", live.usage_export, name="live-usage-export"),
    path("metrics", metrics.MetricsView.as_view(), name="metrics"),
]
