"""The project's settings with a bench URLconf; everything else (middleware, DRF, auth) is unchanged."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.admission_site.urls"

import os  # noqa: E402

# bench/admission.py gives each run its own key prefix, so its cleanup removes its keys and no one else's.
ADMISSION_KEY_PREFIX = os.environ.get("ADMISSION_KEY_PREFIX", "adm:")
