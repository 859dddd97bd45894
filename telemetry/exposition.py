"""The /metrics body: in-process metrics, summed over every web process, plus the database-derived ones.

Under gunicorn each worker counts on its own; with PROMETHEUS_MULTIPROC_DIR set (config/gunicorn.py
sets it) prometheus_client keeps every worker's values in files there and MultiProcessCollector
sums them at scrape time, so a counter reads the same whichever worker answers the scrape. Without
it (runserver, one process) the process's own registry is the whole truth.
"""

from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from telemetry.collectors import DB_REGISTRY


def in_process_registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry)
        return registry
    return REGISTRY


def exposition() -> bytes:
    return generate_latest(in_process_registry()) + generate_latest(DB_REGISTRY)
