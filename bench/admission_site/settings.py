"""The project's settings with a bench URLconf; everything else (middleware, DRF, auth) is unchanged."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.admission_site.urls"
