"""The portal's own Prometheus metrics that are measured in-process (the rest are read from the database
at scrape time by telemetry.collectors, so every web process reports the same totals)."""

from __future__ import annotations

from datetime import datetime

from prometheus_client import Counter, Histogram

INGEST_LAG = Histogram(
    "headroom_ingest_lag_seconds",
    "Seconds from an event's timestamp to its storage: oldest and newest event of each batch",
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


def observe_ingest(source: str, stamps: list[datetime], received_at: datetime) -> None:
    """Per batch, not per event: the oldest and newest event's lag bound every other one in the batch,
    and one observation per event cost a tenth of ingest's Python time. `stamps`: the new events' ts."""
    if not stamps:
        return
    oldest, newest = min(stamps), max(stamps)
    hist = INGEST_LAG.labels(source)
    hist.observe(max(0.0, (received_at - oldest).total_seconds()))
    hist.observe(max(0.0, (received_at - newest).total_seconds()))
    INGESTED.labels(source).inc(len(stamps))


DEAD_LETTERS = Counter(
    "headroom_dead_letters", "Units of work a pipeline quarantined after giving up on them", ["stage"]
)
