"""Reclaim latency measured by the serving path (issue 12.9): from a lender's return to the first
borrower refused RECLAIMED on its pool, written as a ReclaimEvent.

A lender "returns" when its admission on a pool follows a stretch of at least RECLAIM_IDLE_S
(ADMISSION_RECLAIM_IDLE_S, 5 s) without lender admissions there, during which borrowers borrowed.
The first RECLAIMED after that closes the episode with one row; the next episode needs the lender
to go quiet again. Per process (each web process measures what it serves), a few dict operations
per reserve, and one database write per episode.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)


@dataclass
class _Pool:
    last_lender: float = float("-inf")
    last_borrowed: float = float("-inf")
    lender_back: float | None = None


_pools: dict[int, _Pool] = {}
_lock = threading.Lock()


def idle_s() -> float:
    return settings.ADMISSION_RECLAIM_IDLE_S


def _pool(pool_id: int) -> _Pool:
    got = _pools.get(pool_id)
    if got is None:
        got = _pools.setdefault(pool_id, _Pool())
    return got


def lender_admitted(pool_id: int, now: float) -> None:
    p = _pool(pool_id)
    with _lock:
        if p.lender_back is None and now - p.last_lender >= idle_s() and p.last_borrowed > p.last_lender:
            p.lender_back = now
        p.last_lender = now


def borrowed(pool_id: int, now: float) -> None:
    _pool(pool_id).last_borrowed = now


def reclaimed(pool_id: int, now: float) -> None:
    """A borrower was refused RECLAIMED: the first one since a lender's return records the episode."""
    p = _pool(pool_id)
    with _lock:
        back, p.lender_back = p.lender_back, None
    if back is None:
        return
    try:
        record_reclaim(pool_id=pool_id, latency_ms=max(0.0, (now - back) * 1000), borrowers_cut=1)
    except Exception:  # a measurement must never fail an admission
        log.warning("admission: could not record a reclaim on pool %s", pool_id, exc_info=True)


def record_reclaim(*, pool_id: int, latency_ms: float, borrowers_cut: int, at: datetime | None = None) -> Any:
    """One ReclaimEvent (lived in admission.services, which imports this module: the cycle is gone)."""
    from django.utils import timezone

    from admission.models import ReclaimEvent  # models need the app registry; this module does not

    return ReclaimEvent.objects.create(
        pool_id=pool_id, at=at or timezone.now(), latency_ms=latency_ms, borrowers_cut=borrowers_cut
    )


def reset() -> None:
    with _lock:
        _pools.clear()
