"""Settings for the worker subprocesses of tests/reconciliation/test_killed_run.py: the forecast
redelivery test's (short visibility timeout, prompt restore of unacked messages) plus a short
stale-claim window for reconciliation runs, and a pause before each entitlement's figures so the
test can kill a worker part-way through a run (test-only: the project has no such knob)."""

import time

from celery.signals import task_prerun

from tests.forecasting.celery_settings import *  # noqa: F403

RECONCILE_RUN_STALE_AFTER_S = 8
PAUSE_PER_ENTITLEMENT_S = 3.0


@task_prerun.connect
def _slow_figures(**_: object) -> None:
    from reconciliation import figures

    read = figures.read
    if getattr(read, "paused", False):
        return

    def paused(*args: object, **kwargs: object) -> object:
        time.sleep(PAUSE_PER_ENTITLEMENT_S)
        return read(*args, **kwargs)

    paused.paused = True  # type: ignore[attr-defined]
    figures.read = paused
