"""The expiry sweep run from the web process when no Celery beat is configured (issue 12.5).

With a broker, beat runs `admission.tasks.sweep_expired` every 30 s. The embedded default (`make
run`: no broker, tasks inline) has no beat, and a reservation abandoned in a scope that sees no
more traffic would stay in flight until that scope's next reserve (which expires on access). Here
a daemon thread in each process that serves admission sweeps every ADMISSION_SWEEP_EVERY_S (30 s).
ADMISSION_SWEEP_IN_PROCESS forces it on or off; by default it runs exactly when there is no beat
(CELERY_TASK_ALWAYS_EAGER, i.e. no broker).
"""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings
from django.db import close_old_connections

from admission import events, settle
from admission.backends import StoreUnavailable, get_backend

log = logging.getLogger(__name__)
THREAD_NAME = "admission-sweep"

_pid = 0
_lock = threading.Lock()
_stop = threading.Event()  # the running thread's; replaced for each new thread


def wanted() -> bool:
    forced = settings.ADMISSION_SWEEP_IN_PROCESS
    if forced is not None:
        return bool(forced)
    return bool(settings.CELERY_TASK_ALWAYS_EAGER)


def every_s() -> float:
    return settings.ADMISSION_SWEEP_EVERY_S


def ensure_started() -> None:
    """Called on the serving path: a pid comparison once the thread runs in this process."""
    global _pid, _stop
    if _pid == os.getpid():
        return
    with _lock:
        if _pid == os.getpid():
            return
        _pid = os.getpid()  # also after a fork: the parent's thread does not exist in the child
        if not wanted():
            return
        _stop = threading.Event()
        threading.Thread(target=_run, args=(_stop,), name=THREAD_NAME, daemon=True).start()


def sweep(limit: int = 1000) -> int:
    """Settle reservations past their TTL at their full estimate (Celery beat + lazily on access).
    Here, not in admission.services (which starts this thread): no import back into the services."""
    return settle.sweep(get_backend(), events.emit, limit)


def _run(stop: threading.Event) -> None:
    while not stop.wait(every_s()):
        if not wanted():
            continue  # switched off since (tests, settings): idle until switched on again
        try:
            n = sweep()
            if n:
                log.info("admission sweep: %d reservations settled at their estimate", n)
        except StoreUnavailable:
            pass  # the store is down: the next round (or the reserve path) catches up
        except Exception:
            log.exception("admission sweep failed; trying again next round")
        finally:
            close_old_connections()


def stop() -> None:
    """Tests: end this process's sweeper thread (it exits at its next wake-up) and allow a restart."""
    global _pid
    with _lock:
        _stop.set()
        _pid = 0
