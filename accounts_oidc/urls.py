"""OIDC routes, added by config/urls.py when OIDC is configured (settings.OIDC_ENABLED)."""

from __future__ import annotations

from typing import Any

from django.urls import include, path

from accounts_oidc import views

app_urls = [
    path("authenticate/", views.AuthenticationRequestView.as_view(), name="oidc_authentication_init"),
    path("callback/", views.CallbackView.as_view(), name="oidc_authentication_callback"),
]


def with_oidc(urlpatterns: list[Any]) -> list[Any]:
    """The sign-in page that offers the provider (ahead of the portal's own `login/`), and the flow's routes."""
    return [
        path("login/", views.LoginView.as_view(), name="login"),
        path("oidc/", include(app_urls)),
        *urlpatterns,
    ]
