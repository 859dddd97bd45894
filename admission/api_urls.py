"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from admission import api, usd_api
from admission.schema import GatewayTokenScheme  # noqa: F401  (registers the gateway token scheme)
from http_plumbing.url_converters import DottedSlugConverter  # noqa: F401  (registers <dotslug:…>)

urlpatterns = [
    path("admission/reserve", api.ReserveView.as_view(), name="admission-reserve"),
    path("admission/complete", api.CompleteView.as_view(), name="admission-complete"),
    path("admission/pools/<dotslug:slug>/health", api.PoolHealthView.as_view(), name="admission-pool-health"),
    path("usd-budgets", usd_api.UsdBudgetsView.as_view(), name="usd-budgets"),
]
