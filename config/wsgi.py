import os

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from django.conf import settings  # noqa: E402 - configured by the line above

# Refuse to serve without a key (DEBUG off has no default one): a worker that cannot boot is
# better than sign-ins failing one by one. Commands that sign nothing still run without it.
try:
    settings.SECRET_KEY  # noqa: B018 - Django raises on an empty key
except ImproperlyConfigured as exc:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to serve with DEBUG off (DJANGO_DEBUG=1 opts in to a development key)"
    ) from exc
