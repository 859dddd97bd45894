from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

api = [
    path("", include("entitlements.api_urls")),
    path("", include("admission.api_urls")),
    path("", include("telemetry.api_urls")),
    path("", include("forecasting.api_urls")),
    path("", include("portal.api_urls")),
    path("", include("sizing.api_urls")),
    path("", include("alerts.api_urls")),
    path("", include("reconciliation.api_urls")),
]

# The portal's own error pages, in its layout (portal.views.errors); 405 via its middleware.
handler400 = "portal.views.errors.bad_request"
handler403 = "portal.views.errors.permission_denied"
handler404 = "portal.views.errors.page_not_found"
handler500 = "portal.views.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("alerts/", include("alerts.urls")),
    path("", include("telemetry.urls")),  # /metrics
    path("reconciliation/", include("reconciliation.urls")),
    path("", include("portal.urls")),
]

# OIDC sign-in (accounts_oidc, docs/access.md): when configured, its routes and the sign-in page offering it.
if settings.OIDC_ENABLED:
    from accounts_oidc.urls import with_oidc

    urlpatterns = with_oidc(urlpatterns)
