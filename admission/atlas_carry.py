"""Usage carried from Atlas into period budgets (import_atlas): the ledger and the hand-off.

Each `--apply` records, per period bucket it carries into, Atlas's total for the period and the
difference from the previous record (admission.models.CarriedUsage). The store gets that difference
added, never a value set, so traffic Headroom counted between two imports is kept and a second import
with Atlas unchanged carries nothing (and says so).

Who adds it depends on where the store is:
- Redis (REDIS_URL): shared by every process, so the command adds it itself (`add_period_usage`).
- the embedded default: the store lives inside the web server's process, out of the command's reach.
  The command only writes the rows; their table bumps the snapshot's `entitlements` counter
  (admission.snapshot_triggers), and each process holding an in-process store adds the rows it has not
  applied yet when its snapshot check sees the counter move (admission.params), so before its next
  admission decision. A server started later applies the current periods' rows at its first check.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from django.db import transaction

from admission.models import CarriedUsage

_lock = threading.Lock()
_applied: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # store → highest row applied


def in_process(backend: Any) -> bool:
    """A store only its own process can reach (the embedded default's)."""
    return getattr(backend, "name", "") == "memory"


def last_carried(bucket: str) -> float | None:
    """Atlas's total the last import carried into `bucket`, None when nothing was carried yet."""
    row = CarriedUsage.objects.filter(bucket=bucket).order_by("-id").values_list("carried", flat=True).first()
    return None if row is None else float(row)


def carry(backend: Any, bucket: str, period_end: float, total: float, source: str) -> float:
    """Bring `bucket` to Atlas's `total` for the period by adding the difference from the last carry
    (→ that difference; 0 writes nothing). On Redis the store is written inside the row's
    transaction, so a store that refuses leaves no row claiming it was carried."""
    before = last_carried(bucket) or 0.0
    delta = float(total) - before
    if delta == 0:
        return 0.0
    with transaction.atomic():
        CarriedUsage.objects.create(
            bucket=bucket, period_end=period_end, carried=float(total), delta=delta, source=source[:300]
        )
        if not in_process(backend):
            backend.add_period_usage(bucket, delta, period_end)
    return delta


def apply_pending(backend: Any) -> int:
    """Add the rows this process's in-process store has not applied yet (→ how many). Called by the
    snapshot check when the entitlements counter moved; a shared store (Redis) was written by the
    command and is left alone."""
    if not in_process(backend):
        return 0
    with _lock:
        upto = _applied.get(backend, 0)
        now = time.time()
        n = 0
        for pk, bucket, end, delta in (
            CarriedUsage.objects.filter(id__gt=upto).order_by("id").values_list("id", "bucket", "period_end", "delta")
        ):
            upto = pk
            if end > now:  # a past period's bucket is never read again
                backend.add_period_usage(bucket, delta, end)
                n += 1
        _applied[backend] = upto
        return n


__all__ = ["apply_pending", "carry", "in_process", "last_carried"]
