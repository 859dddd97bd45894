"""Where a requested forecast run executes: a Celery worker, or beside the web request.

With a broker the run goes to the workers. Under the embedded default (no broker, Celery eager) the
run would otherwise execute inside the request that asked for it (86 s on the demo, with the status
row never seen below 0 %); instead it runs in a thread of the web process, and the page polls its
progress, which each landed chunk advances (docs/demo.md). FORECAST_RUN_IN_BACKGROUND=0 runs it inline,
as the test suite does.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connections

log = logging.getLogger(__name__)


def dispatch(run_id: str, *, background: bool | None = None) -> threading.Thread | None:
    """Start the committed run; the thread it runs in, when it runs in one."""
    from forecasting.tasks import run_forecast

    if not settings.CELERY_TASK_ALWAYS_EAGER or not (
        settings.FORECAST_RUN_IN_BACKGROUND if background is None else background
    ):
        run_forecast.delay(run_id)
        return None
    thread = threading.Thread(target=_execute, args=(run_id,), name=f"forecast-run-{run_id}", daemon=True)
    thread.start()
    return thread


def _execute(run_id: str) -> None:
    from forecasting.tasks import run_forecast

    try:
        run_forecast.delay(run_id)  # eager: executes here, in this thread; a failure marks the run failed
    except Exception:  # noqa: BLE001 - nobody is waiting on this thread: say it in the log
        log.exception("forecast run %s failed in the background", run_id)
    finally:
        connections.close_all()  # this thread's connections only
