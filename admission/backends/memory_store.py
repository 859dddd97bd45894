"""The in-process backend's records: what one reservation charged (`_Res`) and the store of buckets,
answers, in-flight sets, period budgets and fair-share tables (`_Store`) that memory.py's one lock guards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


def _unix_monotonic() -> Callable[[], float]:
    offset = time.time() - time.monotonic()
    return lambda: time.monotonic() + offset


@dataclass
class _Res:
    state: str
    inflight_key: str
    charged: tuple[str, float, float]  # key, rate, depth
    pool: tuple[str, float, float]
    est: float
    w_out: float
    w_cached: float
    meta: str
    gone_at: float  # when the record itself is forgotten
    max_out: int
    result: dict | None = None
    # Period budgets charged at reserve: (unit, units, ((period key, limit, period end), ...)).
    budget: tuple[str, float, tuple[tuple[str, float, float], ...]] | None = None
    # Issue 36.3: what the reserve charged the lend / keep-back buckets ((key, rate, depth, wt), ...) and
    # the fair-share table ((table, member, weight, window, wt, when)): complete settles them in proportion.
    lending: tuple[tuple[str, float, float, float], ...] = ()
    fair: tuple[str, str, float, float, float, float] | None = None


@dataclass
class _Store:
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # key → (level, at)
    idem: dict[str, tuple[str, float]] = field(default_factory=dict)  # reservation id → (answer, gone_at)
    inflight: dict[str, dict[str, float]] = field(default_factory=dict)  # scope → {rid: expires}
    res: dict[str, _Res] = field(default_factory=dict)
    periods: dict[str, tuple[float, float]] = field(default_factory=dict)  # period key → (used, period end)
    # A pool's fair-share table (issue 36.3): member → [borrowed in window, written at, weight, active until]
    fair: dict[str, dict[str, list[float]]] = field(default_factory=dict)
