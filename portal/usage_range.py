"""The default time range of the usage and entitlement pages (issue 22): the shortest range that has any
data, so a page never opens on empty charts when there is something to show; 24 h when nothing has any.

Each range is probed at the rollup level it would read (telemetry.selectors.resolve_span), with one
indexed EXISTS query per range, shortest first.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q

from telemetry.selectors import ROLLUPS, resolve_span

FALLBACK = "24h"


def first_range_with_data(scope: Q, ranges: dict[str, timedelta], now: datetime) -> str | None:
    for key, span in sorted(ranges.items(), key=lambda kv: kv[1]):
        s = resolve_span(now - span, now)
        if ROLLUPS[s.level].objects.filter(scope, bucket__gte=s.start, bucket__lt=s.end).exists():
            return key
    return None


def default_range(scope: Q, ranges: dict[str, timedelta], now: datetime) -> tuple[str, str]:
    """(range key, why it was chosen) for a page opened without ?range=."""
    key = first_range_with_data(scope, ranges, now)
    if key is None:
        return FALLBACK, f"no data in any range yet: showing the last {FALLBACK}"
    return key, f"showing the last {key}, the shortest range with data"
