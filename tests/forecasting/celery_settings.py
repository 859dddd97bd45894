"""Settings for the worker subprocesses of the redelivery test: the project settings plus a short
stale-claim window, so a redelivered run is taken over seconds (not minutes) after its worker died.
The broker's visibility timeout comes from CELERY_VISIBILITY_TIMEOUT, read by config.settings."""

from config.settings import *  # noqa: F403

FORECAST_RUN_STALE_AFTER_S = 8

# kombu sweeps for abandoned messages every interval × throttle seconds (10 × 10 by default): make
# it every second so the redelivery follows the short visibility timeout promptly.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
