"""One settings file, driven by the environment.

Embedded default (no env): SQLite, in-process cache and admission backend, Celery inline.
`DATABASE_URL`, `REDIS_URL`, `CELERY_BROKER_URL` switch to PostgreSQL, Redis and real workers.
DEBUG is off unless `DJANGO_DEBUG=1`. Production: `DJANGO_SECRET_KEY`, `DJANGO_ALLOWED_HOSTS`.
`make run` serves plain HTTP on 127.0.0.1 with DEBUG off (`HEADROOM_LOCAL_HTTP=1`, a local key).
"""

from __future__ import annotations

import math
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from accounts_oidc.conf import backends as oidc_backends  # plain helpers, no Django import
from config.env import env_bool, env_float, env_int, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
# The product's own public data (operating points, specs, the demo trace): in the checkout, see data/README.md.
DATA_DIR = BASE_DIR / "data"


# Off unless asked for: what a newcomer meets is what production runs (tracebacks only on opt-in).
DEBUG = env_bool("DJANGO_DEBUG", False)
# With DEBUG off there is no default key: serving refuses to start without one (config/wsgi.py),
# while commands that sign nothing (migrate, makemigrations --check) still run.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me" if DEBUG else "")
# Plain HTTP on this machine (`make run`): no HTTPS redirect, no Secure-only cookies, no HSTS.
# Never in production, which is HTTPS only.
LOCAL_HTTP = env_bool("HEADROOM_LOCAL_HTTP", False)
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in env_str("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from our static files: /api/docs/ works offline
    "django_filters",
    "django_htmx",
    "template_partials",
    "django_celery_beat",
    "axes",
    "entitlements",
    "admission",
    "telemetry",
    "sizing",
    "forecasting",
    "reconciliation",
    "alerts",
    "portal",
    "demo",  # the top layer: nothing imports it (pyproject's import-linter contracts)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "http_plumbing.api_guards.NulQueryMiddleware",
    "http_plumbing.api_guards.BodyLimitMiddleware",
    # A gateway's reserve / complete answered here, below the guards and headers that apply to it and
    # above the session, CSRF, messages and page middleware that do not (admission.fast_route).
    "admission.fast_route.ServingPathMiddleware",
    "portal.views.errors.ErrorPageMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into its 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context.nav",
            ],
            # People's text on every page without a {% load %} (docs/pages.md).
            "builtins": ["portal.templatetags.people"],
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
            # IMMEDIATE takes the write lock at BEGIN, so SQLite serialises writers the way
            # select_for_update does on PostgreSQL.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20, "init_command": "PRAGMA journal_mode=WAL;"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Admission store: "redis" when REDIS_URL is set, otherwise the in-process backend.
ADMISSION_BACKEND = env_str("ADMISSION_BACKEND", "redis" if REDIS_URL else "memory")
# A Redis for admission alone (else REDIS_URL), its key prefix, socket timeout in seconds (measured:
# admission.backends.redis) and connections per process.
ADMISSION_REDIS_URL = env_str("ADMISSION_REDIS_URL", "")
ADMISSION_KEY_PREFIX = env_str("ADMISSION_KEY_PREFIX", "adm:")
ADMISSION_REDIS_TIMEOUT_S = env_float("ADMISSION_REDIS_TIMEOUT_S", 0.3)
ADMISSION_REDIS_MAX_CONNECTIONS = env_int("ADMISSION_REDIS_MAX_CONNECTIONS", 64)
# docs/contract.md §5: each bucket holds this many seconds of its rate.
ADMISSION_BUCKET_DEPTH_S = env_float("ADMISSION_BUCKET_DEPTH_S", 60)
# Reclaim keeps this share of a reserved scope's rate in hand before lending the rest.
ADMISSION_RECLAIM_MARGIN = env_float("ADMISSION_RECLAIM_MARGIN", 0.2)
# A reclaim ends after this many seconds without a reserved request asking for its capacity.
ADMISSION_RECLAIM_IDLE_S = env_float("ADMISSION_RECLAIM_IDLE_S", 5)
# The snapshot: how stale another process's write may be seen (one counter read per interval), and a
# full rebuild at least this often whatever the counters say.
ADMISSION_SNAPSHOT_CHECK_S = env_float("ADMISSION_SNAPSHOT_CHECK_S", 0.25)
ADMISSION_SNAPSHOT_TTL_S = env_float("ADMISSION_SNAPSHOT_TTL_S", 300)
# The check runs on a refresher thread per process, off the request threads (admission.params); off:
# the request thread that finds the check due runs it (the test suite's default: deterministic).
ADMISSION_SNAPSHOT_BACKGROUND = env_bool("ADMISSION_SNAPSHOT_BACKGROUND", True)
# A reservation never completed is settled at its full estimate after this TTL; a request id is
# remembered this long for idempotent replays.
ADMISSION_RESERVATION_TTL_S = env_float("ADMISSION_RESERVATION_TTL_S", 600)
ADMISSION_IDEMPOTENCY_TTL_S = env_int("ADMISSION_IDEMPOTENCY_TTL_S", 900)
# Reservation ids are signed with this key (empty: derived from SECRET_KEY); previous keys, comma
# separated, still verify during a rotation.
ADMISSION_SIGNING_KEY = env_str("ADMISSION_SIGNING_KEY", "")
ADMISSION_SIGNING_KEYS_PREVIOUS = [k for k in env_str("ADMISSION_SIGNING_KEYS_PREVIOUS", "").split(",") if k]
# Gateway tokens are remembered for this many seconds per process; the store checks their revocation
# epoch on every reserve/complete, and while it is down this is the staleness bound
# (docs/serving-path-faults.md).
ADMISSION_AUTH_CACHE_S = env_float("ADMISSION_AUTH_CACHE_S", 30)
# Expired reservations are swept in the web process when there is no beat (None: exactly then; set
# 1 or 0 to force), every this many seconds.
ADMISSION_SWEEP_IN_PROCESS = (
    None if env_str("ADMISSION_SWEEP_IN_PROCESS").strip() == "" else env_bool("ADMISSION_SWEEP_IN_PROCESS", False)
)
ADMISSION_SWEEP_EVERY_S = env_float("ADMISSION_SWEEP_EVERY_S", 30)
# Admission events: the in-process buffer's bound, its batch, how often it flushes (seconds) and how
# long a process exit may spend flushing it.
ADMISSION_EVENT_BUFFER = env_int("ADMISSION_EVENT_BUFFER", 100000)
ADMISSION_EVENT_BATCH = env_int("ADMISSION_EVENT_BATCH", 500)
ADMISSION_EVENT_FLUSH_S = env_float("ADMISSION_EVENT_FLUSH_S", 1)
ADMISSION_EVENT_SHUTDOWN_S = env_float("ADMISSION_EVENT_SHUTDOWN_S", 10)
# A batch handed to the broker is checked against PostgreSQL after this wait, doubling per resend
# (admission.event_receipts: kombu's Redis transport can lose a popped message when the broker dies).
ADMISSION_EVENT_CONFIRM_S = env_float("ADMISSION_EVENT_CONFIRM_S", 30, minimum=1, maximum=86400)
ADMISSION_EVENT_CONFIRM_TRIES = env_int("ADMISSION_EVENT_CONFIRM_TRIES", 5, minimum=0, maximum=20)
# Most events or fleet samples one telemetry POST may carry.
TELEMETRY_MAX_BATCH = env_int("TELEMETRY_MAX_BATCH", 20000)
# A JSON body's limit (Django reads it into memory): room for a full TELEMETRY_MAX_BATCH of events at
# up to 512 bytes each (a complete event with every field is about 400), so the documented batch is
# reachable (tests/telemetry/test_body_limit.py) and one request stays near 10 MB of JSON; over it the API
# answers a JSON 400 naming the limit (http_plumbing.api_guards.BodyLimitMiddleware).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", TELEMETRY_MAX_BATCH * 512)
# Alertmanager webhook (telemetry.alertmanager, issue 24): the label naming the pool an alert is about,
# and the alert names that mean supply is gone (each firing one takes one replica, by `instance`, out of
# the pool's health until it resolves). Any alert whose rule is `up == 0` (read from its generatorURL)
# is a supply alert too; every other alert is load evidence only. Comma-separated in the environment.
ALERTMANAGER_POOL_LABEL = env_str("ALERTMANAGER_POOL_LABEL", "pool")
ALERTMANAGER_SUPPLY_ALERTS = [
    n.strip() for n in env_str("ALERTMANAGER_SUPPLY_ALERTS", "ServiceDown").split(",") if n.strip()
]
# Alerts: links in emails start with this (e.g. https://headroom.example); webhook attempts, the first
# retry's wait (doubling after), the request timeout, whether private addresses may be called (on in
# development), and how many days resolved alerts are kept.
HEADROOM_BASE_URL = env_str("HEADROOM_BASE_URL", "")
ALERTS_WEBHOOK_MAX_ATTEMPTS = env_int("ALERTS_WEBHOOK_MAX_ATTEMPTS", 6)
ALERTS_WEBHOOK_BACKOFF_BASE_S = env_float("ALERTS_WEBHOOK_BACKOFF_BASE_S", 30)
ALERTS_WEBHOOK_TIMEOUT_S = env_float("ALERTS_WEBHOOK_TIMEOUT_S", 5)
ALERTS_WEBHOOK_ALLOW_PRIVATE = env_bool("ALERTS_WEBHOOK_ALLOW_PRIVATE", DEBUG)
ALERTS_RETENTION_DAYS = env_int("ALERTS_RETENTION_DAYS", 90)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_BROKER_URL = CELERY_BROKER_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Admission events and the sweep on a queue of their own, with a worker of its own (bin/run_all.py):
# behind forecast chunks on the default queue they landed a minute late (docs/serving-path-faults.md).
ADMISSION_EVENTS_QUEUE = "admission-events"
CELERY_TASK_ROUTES = {"admission.tasks.*": {"queue": ADMISSION_EVENTS_QUEUE}}
# A task whose worker died is redelivered after this many seconds (Redis broker): minutes, not an
# hour (issue 12.10). A redelivery of a run that is still alive does nothing: the run is claimed by
# compare-and-swap and only taken over after FORECAST_RUN_STALE_AFTER_S without a checkpoint.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 300),
    # kombu looks for abandoned messages every interval × throttle seconds.
    "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": env_int("CELERY_UNACKED_RESTORE_THROTTLE", 10),
    # Bound every broker socket: a warm shutdown after the broker died can otherwise wait on a socket
    # for ever (Celery's own escape hatch for it; seen once: a worker that lost its broker sat in
    # "Shutting down..." for 4 minutes and was never restarted). BRPOP's own wait is 1 s, far below.
    "socket_timeout": env_float("CELERY_BROKER_SOCKET_TIMEOUT", 30, minimum=1, maximum=3600),
    "socket_connect_timeout": env_float("CELERY_BROKER_CONNECT_TIMEOUT", 10, minimum=0.1, maximum=600),
}
# A forecast run whose worker has not checkpointed for this long may be taken over by a redelivery;
# keep it above the slowest batch, and the visibility timeout above the slowest run.
FORECAST_RUN_STALE_AFTER_S = env_int("FORECAST_RUN_STALE_AFTER_S", 600)
# Series per forecast chunk: a run fans out into chunks that Celery workers forecast in parallel, and a
# killed worker costs one chunk, not the run (forecasting.chunks). Small enough to spread over workers,
# large enough that each StatsForecast call amortises its set-up (a run parameter may override it).
FORECAST_CHUNK_SIZE = env_int("FORECAST_CHUNK_SIZE", 50 if not CELERY_TASK_ALWAYS_EAGER else 3)
# Embedded default (no broker): a run executes in a thread beside the request that asked for it, its
# chunks one after another, so small chunks move its progress every few series (forecasting.launch).
FORECAST_RUN_IN_BACKGROUND = env_bool("FORECAST_RUN_IN_BACKGROUND", True)
# Reconciliation (issue 17.2): the thresholds its findings use, over a trailing window of whole hours.
RECONCILE_WINDOW_DAYS = env_int("RECONCILE_WINDOW_DAYS", 14)
# A reconciliation run checkpoints once per entitlement; this long without one, a redelivered task
# takes the run over (its worker died): as FORECAST_RUN_STALE_AFTER_S for forecast runs.
RECONCILE_RUN_STALE_AFTER_S = env_int("RECONCILE_RUN_STALE_AFTER_S", 600)
# right-size down: the p95 of hourly use stayed below this share of what was bought, all window long
RECONCILE_RIGHTSIZE_SHARE = env_float("RECONCILE_RIGHTSIZE_SHARE", 0.40)
# the new CU a right-size or a grow recommends: the p95 hour of demand at this utilisation
RECONCILE_TARGET_UTILISATION = env_float("RECONCILE_TARGET_UTILISATION", 0.70)
# grow: tenant-caused throttles (quota, concurrency, budget) above this share of arrivals …
RECONCILE_TENANT_THROTTLE_SHARE = env_float("RECONCILE_TENANT_THROTTLE_SHARE", 0.01)
# … or (best_effort) borrowing on more than this share of the window's days
RECONCILE_BORROW_DAYS_SHARE = env_float("RECONCILE_BORROW_DAYS_SHARE", 0.5)
# envelope drift: refused outside the envelope above this share of arrivals, or an observed p95
# length above the promised one (within the histogram's bin, ±26 %: above by more than this factor)
RECONCILE_OUTSIDE_SHARE = env_float("RECONCILE_OUTSIDE_SHARE", 0.01)
RECONCILE_P95_TOLERANCE = env_float("RECONCILE_P95_TOLERANCE", 1.26)
# platform owes: at least this many platform-caused throttles plus latency misses inside the promise
RECONCILE_PLATFORM_MIN = env_int("RECONCILE_PLATFORM_MIN", 1)
# Hour and day rollups are folded from the minute rollups by Celery beat every 30 s, and by ingest
# when this process has not folded for this long (telemetry.fold): how stale they may get.
TELEMETRY_FOLD_EVERY_S = env_float("TELEMETRY_FOLD_EVERY_S", 30)
# Plausible event and fleet-sample times (docs/contract.md §6): older or further ahead is a bad event.
TELEMETRY_TS_MAX_AGE_S = env_float("TELEMETRY_TS_MAX_AGE_S", 7 * 86400)
TELEMETRY_TS_MAX_AHEAD_S = env_float("TELEMETRY_TS_MAX_AHEAD_S", 300)
# Retention (docs/contract.md §6), in whole UTC days back from today's midnight; the hourly beat task
# telemetry.tasks.maintain_storage applies it (telemetry.retention). Raw events: on PostgreSQL whole
# daily partitions are dropped, on SQLite the rows are deleted.
TELEMETRY_EVENT_RETENTION_DAYS = env_int("TELEMETRY_EVENT_RETENTION_DAYS", 35)
TELEMETRY_MINUTE_ROLLUP_RETENTION_DAYS = env_int("TELEMETRY_MINUTE_ROLLUP_RETENTION_DAYS", 35)
TELEMETRY_HOUR_ROLLUP_RETENTION_DAYS = env_int("TELEMETRY_HOUR_ROLLUP_RETENTION_DAYS", 730)
TELEMETRY_DAY_ROLLUP_RETENTION_DAYS = env_int("TELEMETRY_DAY_ROLLUP_RETENTION_DAYS", 730)
# Dedup keys (source, event_id) outlive the events by the plausible-ts window: a replayed event is then
# either still known (a duplicate) or older than TELEMETRY_TS_MAX_AGE_S (refused by validation), never
# stored twice. Shorter than that window would let a replay in: refused at start-up.
TELEMETRY_DEDUP_RETENTION_DAYS = env_int(
    "TELEMETRY_DEDUP_RETENTION_DAYS", TELEMETRY_EVENT_RETENTION_DAYS + math.ceil(TELEMETRY_TS_MAX_AGE_S / 86400)
)
if math.ceil(TELEMETRY_TS_MAX_AGE_S / 86400) > TELEMETRY_DEDUP_RETENTION_DAYS:
    raise ImproperlyConfigured("TELEMETRY_DEDUP_RETENTION_DAYS must cover TELEMETRY_TS_MAX_AGE_S")
# PostgreSQL: daily event partitions created this many days ahead (the DEFAULT partition catches the rest).
TELEMETRY_PARTITIONS_AHEAD_DAYS = env_int("TELEMETRY_PARTITIONS_AHEAD_DAYS", 7)
# Cost defaults where the catalogue has no figure, read only by entitlements.sizing_specs.CostOptions:
# the sizing API, the calculator page's first values and the planning cost report start from them.
# Power usage effectiveness, electricity price (USD/kWh), idle draw as a share of busy draw (owned
# hardware only: a cloud rate includes power) and traffic price (USD/GB, sizing only).
COST_PUE = env_float("COST_PUE", 1.3)
COST_ELECTRICITY_PER_KWH = env_float("COST_ELECTRICITY_PER_KWH", 0.10)
COST_IDLE_POWER_SHARE = env_float("COST_IDLE_POWER_SHARE", 0.3)
COST_NETWORK_PER_GB = env_float("COST_NETWORK_PER_GB", 0.0)
# Largest trace CSV `POST /api/v1/traces` accepts (bytes); a larger one is a 400 naming `file`.
TRACE_MAX_BYTES = env_int("TRACE_MAX_BYTES", 64 * 1024 * 1024)
# Sizing's prefill bound: the share of dense peak FLOP/s a replica sustains on prompts (issue 15.3).
SIZING_PREFILL_MFU = env_float("SIZING_PREFILL_MFU", 0.5)
# The planning answer's default throttled share per traffic class (docs/planning.md). An envelope's
# minute-rate CV defaults to what the tenant recorded, else data/workload_cv.csv (telemetry.minute_cv).
PLANNING_TARGET_THROTTLED_SHARE = {"reserved": 0.001, "shared": 0.001, "best_effort": 0.01}
# Default concurrency caps: Little's law × this burst factor, capped by the KV share (issue 15.5).
CONCURRENCY_BURST_FACTOR = env_float("CONCURRENCY_BURST_FACTOR", 2.0)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
# Schedules live in django-celery-beat's tables (each app's data migration), edited in the admin.

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Brute force (README, "Access and audit"): django-axes locks sign-in per account and per address after
# AXES_FAILURE_LIMIT failures for AXES_COOLOFF_TIME hours; invalid API tokens are throttled per address
# (http_plumbing.throttles). Behind a proxy, set HEADROOM_NUM_PROXIES so the address is the client's.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
NUM_PROXIES = env_int("HEADROOM_NUM_PROXIES", 0)
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_TIME", 0.25)
# Passwords: per account or per address. OIDC: per provider subject once the ID token names one, else
# per address; never under an empty name shared by every refusal (accounts_oidc/lockout.py).
AXES_LOCKOUT_PARAMETERS = "accounts_oidc.lockout.parameters"
AXES_USERNAME_CALLABLE = "accounts_oidc.lockout.username"
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "http_plumbing.throttles.client_address"
INVALID_TOKEN_RATE = env_str("INVALID_TOKEN_RATE", "20/min")
# /metrics without a token: these addresses or CIDR blocks only (telemetry/metrics_view.py).
METRICS_ALLOWED_IPS = env_str("METRICS_ALLOWED_IPS", "127.0.0.1,::1")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# OIDC sign-in beside the local login (accounts_oidc; docs/access.md, "OIDC sign-in"): OIDC_*, LOCAL_LOGIN
# and LOGIN_REDIRECT_URL_FAILURE, read from the environment in config/settings_oidc.py.
from config.settings_oidc import *  # noqa: E402, F403
from config.settings_oidc import LOCAL_LOGIN, OIDC_ENABLED  # noqa: E402

INSTALLED_APPS += ["accounts_oidc"]
AUTHENTICATION_BACKENDS = oidc_backends(AUTHENTICATION_BACKENDS, oidc_enabled=OIDC_ENABLED, local_login=LOCAL_LOGIN)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic writes here and whitenoise serves from here when DEBUG is off.
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "headroom@localhost")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "entitlements.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "http_plumbing.api_guards.BoundedLimitOffsetPagination",
    "DEFAULT_PARSER_CLASSES": [
        "http_plumbing.api_guards.GuardedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 200,
    "EXCEPTION_HANDLER": "http_plumbing.api_errors.exception_handler",
    "NUM_PROXIES": NUM_PROXIES,
}
# config/csp.py: scripts only from this site's files (no inline script, no eval); styles also inline
# (plotly and htmx write them). Empty turns the header off.
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data:",  # Swagger UI's and plotly's icons
    "font-src": "'self' data:",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",  # as X-Frame-Options DENY
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Headroom API",
    "DESCRIPTION": "Capacity as a product: catalogue, pools, entitlements, sizing, admission, telemetry.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "ENUM_NAME_OVERRIDES": {
        "LaunchTrafficClassEnum": "portal.models.LaunchRequest.TrafficClassChoice",
        "ScenarioBasisEnum": "portal.models.Basis",
        "BudgetUnitEnum": "entitlements.limits.UNIT_CHOICES",
        "OverflowEnum": "entitlements.models.grants.Entitlement.Overflow",
        "CommitmentTermEnum": "entitlements.models.prices.Term",
    },
}

if not DEBUG and not LOCAL_HTTP:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"drop_throttles": {"()": "config.log_filters.DropThrottles"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["drop_throttles"]},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
    # runserver's access log drowns `make run`'s URL and logins under the simulator's traffic.
    "loggers": {
        "django.server": {
            "handlers": ["console"],
            "level": env_str("SERVER_LOG_LEVEL", "WARNING"),
            "propagate": False,
        }
    },
}
