"""Settings for the events worker of test_events_worker_redis_kills.py: the project's, with a message its
worker held unacknowledged when the broker died redelivered in seconds, not production's 5 minutes
(visibility 300 s; kombu's restore lock, held by a worker killed mid-sweep, also 300 s). With
EVENTS_WORKER_EXITS=1 the worker exits when it loses the broker instead of reconnecting (Celery's
broker_connection_retry off), as the one the review saw exit when kombu's reconnect raised; bin/run_all.py
must bring it back."""

import os

from config.settings import *  # noqa: F403

CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
    "visibility_timeout": 20,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
    "unacked_mutex_expire": 20,
}
if os.environ.get("EVENTS_WORKER_EXITS") == "1":
    CELERY_BROKER_CONNECTION_RETRY = False
    CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = False
