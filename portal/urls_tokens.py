"""Self-service API tokens (mounted at /tokens/ by portal/urls.py)."""

from django.urls import path

from portal.views import tokens

urlpatterns = [
    path("", tokens.tokens, name="tokens"),
    path("revoke", tokens.revoke, name="tokens-revoke"),
]
