"""The project's settings with a bench URLconf; everything else (middleware, DRF, auth) is unchanged."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.admission_site.urls"

import os  # noqa: E402

# bench/admission.py gives each run its own key prefix, so its cleanup removes its keys and no one else's.
ADMISSION_KEY_PREFIX = os.environ.get("ADMISSION_KEY_PREFIX", "adm:")

# Persistent database connections, as production's PostgreSQL has them (DB_CONN_MAX_AGE, default 60):
# the bench runs on SQLite, whose default (0) would reconnect for every snapshot counter check.
DATABASES["default"]["CONN_MAX_AGE"] = 60  # noqa: F405

# BENCH_NO_FAST_ROUTE=1: the serving path through the whole middleware stack, as before issue 49.2's
# admission.fast_route, so a run can read the figure it replaced.
if os.environ.get("BENCH_NO_FAST_ROUTE"):
    MIDDLEWARE = [m for m in MIDDLEWARE if not m.endswith("ServingPathMiddleware")]  # noqa: F405
