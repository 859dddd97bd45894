"""gunicorn settings: `gunicorn -c config/gunicorn.py config.wsgi`.

Prometheus multiprocess mode: every worker writes its counters to files in PROMETHEUS_MULTIPROC_DIR,
and /metrics sums them (telemetry.exposition), so a scrape sees the whole server, not one worker.
The directory is emptied when the server starts (stale files would add old counts), and a worker
that exits is marked dead so its live gauges drop out while its counters keep counting.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", str(2 * (os.cpu_count() or 1))))

_dir = os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", os.path.join(tempfile.gettempdir(), "headroom-prometheus"))


def on_starting(server: Any) -> None:
    shutil.rmtree(_dir, ignore_errors=True)
    os.makedirs(_dir, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
