from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

api = [
    path("", include("entitlements.api_urls")),
    path("", include("admission.api_urls")),
    path("", include("telemetry.api_urls")),
    path("", include("forecasting.api_urls")),
    path("", include("portal.api_urls")),
    path("", include("telemetry.sizing_urls")),
    path("", include("alerts.api_urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("alerts/", include("alerts.urls")),
    path("", include("portal.urls")),
]
