"""The portal's own Prometheus metrics that are measured in-process (the rest are read from the database
at scrape time by telemetry.collectors, so every web process reports the same totals)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Histogram

INGEST_LAG = Histogram(
    "headroom_ingest_lag_seconds",
    "Seconds from an event's timestamp to its storage, per accepted event",
    ["source"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600),
)
INGESTED = Counter("headroom_ingested_events", "Events accepted by ingest (new, not duplicates)", ["source"])
TASK_SECONDS = Histogram(
    "headroom_task_duration_seconds",
    "Duration of telemetry tasks",
    ["task"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)


def observe_ingest(source: str, rows: Iterable[dict[str, Any]], received_at: datetime) -> None:
    n = 0
    hist = INGEST_LAG.labels(source)
    for r in rows:
        hist.observe(max(0.0, (received_at - r["ts"]).total_seconds()))
        n += 1
    if n:
        INGESTED.labels(source).inc(n)
