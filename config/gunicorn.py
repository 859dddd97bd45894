"""gunicorn settings: `gunicorn -c config/gunicorn.py config.wsgi` (bin/run_all.py for `make run`).

Without REDIS_URL the admission store lives in the process, so the server is ONE worker with
threads: several workers would each keep their own token buckets and over-admit. A configuration
asking for more is refused at start-up. With REDIS_URL the workers share the Redis store.

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
_shared_store = os.environ.get("ADMISSION_BACKEND", "redis" if os.environ.get("REDIS_URL") else "memory") == "redis"
workers = int(os.environ.get("WEB_CONCURRENCY", str(2 * (os.cpu_count() or 1) if _shared_store else 1)))
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
# gunicorn's control socket is one path per user (~/.gunicorn): two servers on a machine would share it.
control_socket_disable = True

_dir = os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", os.path.join(tempfile.gettempdir(), "headroom-prometheus"))


def on_starting(server: Any) -> None:
    if server.cfg.workers > 1 and not _shared_store:
        raise RuntimeError(
            f"{server.cfg.workers} workers with the in-process admission store would over-admit: "
            "run one worker with threads, or set REDIS_URL"
        )
    shutil.rmtree(_dir, ignore_errors=True)
    os.makedirs(_dir, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
