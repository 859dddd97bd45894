"""ISO 8601 UTC timestamps for the serving path (`expires_at`, event `ts`), cheaply.

Exactly `datetime.fromtimestamp(t, UTC).isoformat()` with `Z` for `+00:00`, but the date and time
of day are formatted once per second and reused: a reserve formats two of them, and building
datetimes was a measurable share of it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_seconds: dict[int, str] = {}  # whole second → 'YYYY-MM-DDTHH:MM:SS'


def iso_utc(t: float) -> str:
    whole = int(t // 1)
    us = round((t - whole) * 1e6)  # as datetime rounds: half to even, to the microsecond
    if us >= 1_000_000:
        whole, us = whole + 1, us - 1_000_000
    head = _seconds.get(whole)
    if head is None:
        if len(_seconds) > 64:
            _seconds.clear()
        head = _seconds[whole] = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{head}.{us:06d}Z" if us else head + "Z"


def now_iso() -> str:
    return iso_utc(time.time())
