"""config.urls as it is with OIDC configured (config/urls.py adds these routes when OIDC_ENABLED at import)."""

from accounts_oidc.urls import with_oidc
from config.urls import handler400, handler403, handler404, handler500  # noqa: F401
from config.urls import urlpatterns as base

urlpatterns = with_oidc(base)
