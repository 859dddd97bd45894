"""Web routes, one module per area so each area's views stay in their own files."""

from django.urls import include, path

urlpatterns = [
    path("", include("portal.urls_home")),
    path("launch/", include("portal.urls_intake")),
    path("sizing/", include("portal.urls_sizing")),
    path("", include("portal.urls_live")),
    path("planning/", include("portal.urls_planning")),
    path("tokens/", include("portal.urls_tokens")),
]
