"""The one claim helper for runs.models.ClaimedRun rows (ForecastRun, ReconciliationRun).

    claim()      'claimed', 'busy' (a live worker has it) or 'done'; two paths, both a compare-and-set:
                 QUEUED → RUNNING, or RUNNING with a stale heartbeat → RUNNING under the new worker
    heartbeat()  move the checkpoint forward (and any progress fields) while the claim holds
    held()       the run, filtered to "still RUNNING and still mine": lock it or update it
    release()    give the claim back (QUEUED) before a retry for a transient error
    finish()     SUCCEEDED, once: only the claimant can, only while it holds the claim
    fail()       FAILED, likewise

Every write but claim() is conditional on the claim, so a worker taken over while it slept (a long
GC pause, a partition) finds it has lost the run (False, or ClaimLost from `hold()`) and writes nothing.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from runs.models import ClaimedRun

Run = TypeVar("Run", bound=ClaimedRun)
RUNNING = ClaimedRun.Status.RUNNING


class ClaimLost(Exception):
    """The run was taken over (its heartbeat went stale) or finished by another claimant."""


def worker_id(suffix: str | None = None) -> str:
    """host:pid:suffix — the claimant's name (a Celery task passes its request id)."""
    return f"{socket.gethostname()}:{os.getpid()}:{suffix or uuid.uuid4().hex}"


def stale_after(model: type[ClaimedRun]) -> timedelta:
    return timedelta(seconds=getattr(settings, model.STALE_AFTER_SETTING))


def claim(model: type[ClaimedRun], *, pk: Any, worker: str, now: datetime | None = None, **also: Any) -> str:
    """Take the run for `worker`: a queued one, or a running one whose claimant stopped checkpointing."""
    now = now or timezone.now()
    take = {"status": RUNNING, "claimed_by": worker, "heartbeat_at": now, "started_at": now, **also}
    runs = model._default_manager.filter(pk=pk)
    if runs.filter(status=model.Status.QUEUED).update(attempts=F("attempts") + 1, **take):
        return "claimed"
    stale = Q(heartbeat_at__lt=now - stale_after(model)) | Q(heartbeat_at__isnull=True)
    if runs.filter(stale, status=RUNNING).update(attempts=F("attempts") + 1, **take):
        return "claimed"
    status = runs.values_list("status", flat=True).first()
    return "busy" if status == RUNNING else "done"


def held(model: type[Run], *, pk: Any, worker: str) -> QuerySet[Run]:
    return model._default_manager.filter(pk=pk, status=RUNNING, claimed_by=worker)


def heartbeat(model: type[ClaimedRun], *, pk: Any, worker: str, **fields: Any) -> bool:
    return bool(held(model, pk=pk, worker=worker).update(heartbeat_at=timezone.now(), **fields))


def hold(model: type[ClaimedRun], *, pk: Any, worker: str, **fields: Any) -> None:
    """heartbeat() or raise ClaimLost. Inside a transaction, its UPDATE also locks the run's row until
    commit: a write that starts with it lands only while the claim holds."""
    if not heartbeat(model, pk=pk, worker=worker, **fields):
        raise ClaimLost(str(pk))


def release(model: type[ClaimedRun], *, pk: Any, worker: str) -> bool:
    return bool(held(model, pk=pk, worker=worker).update(status=model.Status.QUEUED, claimed_by="", heartbeat_at=None))


def finish(model: type[ClaimedRun], *, pk: Any, worker: str, **fields: Any) -> bool:
    return bool(
        held(model, pk=pk, worker=worker).update(status=model.Status.SUCCEEDED, finished_at=timezone.now(), **fields)
    )


def fail(model: type[ClaimedRun], *, pk: Any, worker: str, error: str, limit: int = 4000) -> bool:
    return bool(
        held(model, pk=pk, worker=worker).update(
            status=model.Status.FAILED, error=error[:limit], finished_at=timezone.now()
        )
    )
