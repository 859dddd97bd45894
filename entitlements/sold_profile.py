"""sold(t) as its change points, for a pool set in one query (issue 52's availability read).

The database hands over only the counted, live entitlements overlapping the span, each as four integers
(pool, start and end in µs since the epoch, CU in milli-CU: CU are stored to 3 decimals, so the integers
are exact); numpy sorts their edges and sums them. The same sweep as the approval's peak
(entitlements.selectors.sold_events_sql): a start before the span counts from its start, an end is −cu at
its instant, and every edge at one instant is applied before that instant's total is read (an entitlement
ending at t is not active at t, one starting at t is). What comes back is a step function per pool; the
most sold over any [a, b) is a range maximum over its steps (a sparse table: O(n log n) to build, O(1) per
window), so a date search over 400 start days costs a few array operations, not a read per day.

It was a read per day (the database grouped every step by day, in numeric; now bench/availability_old_read.py):
the endpoint at 10,000 entitlements took 330 ms with it against 156 ms with this read, interleaved in one
run at load 12 on 2 cores (bench/availability.py; 30 rounds, medians).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

import numpy as np
from django.db import connection

from entitlements.models import Entitlement
from entitlements.selectors import Window, overlapping

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
OPEN = 2**63 - 1  # an open end: later than any instant


def us(t: datetime) -> int:
    """µs since the epoch, exact (integer arithmetic on the timedelta)."""
    d = t - EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _as_integers_sql(rows_sql: str) -> str:
    """The rows (k, s, e, cu) as integers, in the database: datetimes to µs (an open end to OPEN), CU to
    milli-CU. Integers cross to Python in a C loop (datetimes and decimals cost ~30x more to read)."""
    if connection.vendor == "postgresql":
        # date_part is float8 (EXTRACT's numeric costs ~15 ms more at 10,000 rows): seconds below 2**32
        # (until 2106) carry < 0.5 µs of error through × 10**6, so the cast's rounding is exact.
        def stamp(c: str) -> str:
            return f"(date_part('epoch', {c}) * 1000000)::bigint"

        cu = "(cu * 1000)::bigint"
    else:
        # SQLite keeps an aware datetime as UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]' (six digits when present).
        def stamp(c: str) -> str:
            # whole seconds from the text's first 19 characters: strftime rounds a fraction (:00.999999 → :01)
            return (
                f"(CAST(strftime('%%s', substr({c}, 1, 19)) AS INTEGER) * 1000000"
                f" + CAST(substr({c} || '.000000', 21, 6) AS INTEGER))"
            )

        cu = "CAST(ROUND(cu * 1000) AS INTEGER)"
    return (
        f"WITH r(k, s, e, cu) AS ({rows_sql}) "  # noqa: S608 - the ORM's own SQL and parameters
        f"SELECT k, {stamp('s')}, COALESCE({stamp('e')}, {OPEN}), {cu} FROM r"
    )


@dataclass(frozen=True)
class Steps:
    """sold(t) over [start, end) in milli-CU: `total[i]` holds from `t[i]` until `t[i + 1]` (the last one to
    the end); `t[0]` is the span's start."""

    t: np.ndarray
    total: np.ndarray

    def __post_init__(self) -> None:
        # The sparse table: level j holds the max of total[i : i + 2**j].
        levels = [self.total]
        while 2 ** len(levels) <= len(self.total):
            prev, half = levels[-1], 2 ** (len(levels) - 1)
            levels.append(np.maximum(prev[:-half], prev[half:]))
        object.__setattr__(self, "_levels", levels)

    def _range_max(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """max(total[lo:hi]) for each pair (hi > lo)."""
        n = hi - lo
        j = np.floor(np.log2(n)).astype(np.int64)
        out = np.empty(len(lo), dtype=np.int64)
        levels = self._levels  # type: ignore[attr-defined]
        for level in np.unique(j):
            m = j == level
            table = levels[level]
            out[m] = np.maximum(table[lo[m]], table[hi[m] - (1 << int(level))])
        return out

    def peaks_milli(self, starts: np.ndarray, length: int | None) -> np.ndarray:
        """The most sold over [a, a + length) (None: from a on) for each start a (µs, ≥ t[0])."""
        starts = np.asarray(starts, dtype=np.int64)
        if len(starts) and starts.min() < self.t[0]:  # nothing read before the span: no figure for it
            raise ValueError("a window starting before the steps' span")
        lo = np.searchsorted(self.t, starts, side="right") - 1  # the step in force at a
        if length is None:
            hi = np.full(len(starts), len(self.t), dtype=np.int64)
        else:
            hi = np.searchsorted(self.t, starts + length, side="left")  # steps from before a + length
        return self._range_max(lo, np.maximum(hi, lo + 1))

    def peak(self, a: datetime, b: datetime | None) -> Decimal:
        """The most sold over [a, b) (None: from a on), in CU."""
        length = None if b is None else us(b) - us(a)
        return Decimal(int(self.peaks_milli(np.array([us(a)]), length)[0])) / 1000


def sold_steps(pool_ids: Iterable[int], window: Window) -> dict[int, Steps]:
    """pool → sold(t) over the window as change points (window.end None: every change from its start on)."""
    ids = sorted(set(pool_ids))
    qs = overlapping(
        Entitlement.objects.filter(pool_id__in=ids, traffic_class__counts_as_sold=True), window.start, window.end
    )
    rows_sql, params = qs.order_by().values_list("pool_id", "starts_at", "ends_at", "cu").query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(_as_integers_sql(rows_sql), params)
        rows = cur.fetchall()
    a = np.array(rows, dtype=np.int64).reshape(-1, 4)
    t0 = us(window.start)
    t1 = OPEN if window.end is None else us(window.end)
    k, s, e, cu = a[:, 0], np.maximum(a[:, 1], t0), a[:, 2], a[:, 3]
    inside = e < t1  # an end at or after the window's end changes nothing in it
    ek = np.concatenate([k, k[inside], np.array(ids, dtype=np.int64)])
    et = np.concatenate([s, e[inside], np.full(len(ids), t0, dtype=np.int64)])  # a zero step at the start
    ed = np.concatenate([cu, -cu[inside], np.zeros(len(ids), dtype=np.int64)])
    order = np.lexsort((et, ek))
    ek, et, ed = ek[order], et[order], ed[order]
    # One step per (pool, instant): every edge at an instant applied before its total is read.
    last = np.ones(len(ek), dtype=bool)
    last[:-1] = (ek[1:] != ek[:-1]) | (et[1:] != et[:-1])
    running = np.cumsum(ed)
    starts = np.searchsorted(ek, ids, side="left")  # every pool has an edge: its zero step
    sk, st, stotal = ek[last], et[last], running[last]
    lo, hi = np.searchsorted(sk, ids, side="left"), np.searchsorted(sk, ids, side="right")
    out: dict[int, Steps] = {}
    for i, pk in enumerate(ids):
        # The running sum runs across pools, sorted by pool: take off what the pools before this one sum to.
        base = running[starts[i] - 1] if starts[i] else 0
        out[pk] = Steps(st[lo[i] : hi[i]], np.maximum(stotal[lo[i] : hi[i]] - base, 0))
    return out
