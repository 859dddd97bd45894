"""The provider's settings: everything from the environment ProviderServer sets."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "oidc-provider-test-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ISSUER = os.environ["OIDC_PROVIDER_ISSUER"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# Its own cookie names: the browser keeps one jar per host, not per port.
SESSION_COOKIE_NAME = "op_session"
CSRF_COOKIE_NAME = "op_csrf"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # a test's provider: fast sign-in
CLAIMS_FILE = os.environ["OIDC_PROVIDER_CLAIMS"]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_PROVIDER_KEY"]).read_text(),
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validators.ClaimsFromFile",
    "SCOPES": {"openid": "OpenID Connect", "email": "e-mail", "profile": "profile"},
    "PKCE_REQUIRED": True,
    "ALLOW_LOCALHOST_LOOPBACK": True,  # the relying party's live server: http://localhost:<any port>
}
