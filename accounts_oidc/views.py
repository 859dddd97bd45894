"""The sign-in page with the provider's button, the start of the code flow, and its callback."""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from mozilla_django_oidc import views as oidc_views

from accounts_oidc import discovery, lockout
from accounts_oidc.backends import REFUSAL_ATTR
from accounts_oidc.claims import SignInRefused
from portal.views import home

log = logging.getLogger(__name__)


def refused(request: HttpRequest, refusal: SignInRefused) -> HttpResponse:
    return render(
        request,
        "accounts_oidc/refused.html",
        {"refusal": refusal, "provider_name": settings.OIDC_PROVIDER_NAME},
        status=refusal.status,
    )


class LoginView(home.LoginView):
    """The portal's sign-in page, offering "Sign in with <provider>"; with LOCAL_LOGIN off, only that
    button: the password form is not shown and a POST of it is refused (403)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_LOGIN:
            raise PermissionDenied("sign-in with a password is switched off here")
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(**kwargs) | {
            "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
            "local_login_off": not settings.LOCAL_LOGIN,
        }


class AuthenticationRequestView(oidc_views.OIDCAuthenticationRequestView):
    """Redirects to the provider's authorization endpoint (from discovery, unless set)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(oidc_views.OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)  # endpoints: in get()

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return discovery.get_setting(attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            self.OIDC_OP_AUTH_ENDPOINT = self.get_settings("OIDC_OP_AUTHORIZATION_ENDPOINT")
            self.OIDC_RP_CLIENT_ID = self.get_settings("OIDC_RP_CLIENT_ID")
        except (requests.RequestException, ValueError, ImproperlyConfigured) as exc:
            log.error("OIDC provider discovery failed: %s", exc)
            return refused(
                request,
                SignInRefused(
                    f"{settings.OIDC_PROVIDER_NAME} cannot be reached just now; try again in a minute.",
                    title="Sign-in unavailable",
                    status=503,
                ),
            )
        return super().get(request)


class CallbackView(oidc_views.OIDCAuthenticationCallbackView):
    """The provider's redirect back: signs the person in, or shows why not (an unknown tenant by name)."""

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return discovery.get_setting(attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:
        lockout.start_callback(request)  # django-axes counts this sign-in's failures by identity, not by name
        return super().get(request)

    def login_failure(self) -> HttpResponse:
        refusal = getattr(self.request, REFUSAL_ATTR, None)
        if refusal is None:
            refusal = SignInRefused("The sign-in with your identity provider did not complete. Try again.")
        return refused(self.request, refusal)
