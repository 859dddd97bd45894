"""When an entitlement's CU counts: one rule, as a query filter and as a test of one row.

Active at t: started (starts_at ≤ t), not ended (no ends_at, or ends_at > t) and not revoked by then
(no revoked_at, or revoked_at > t). An entitlement ending at t is not active at t while one starting
at t is, so the two are never summed together; a revoked one counted until its revocation, so a past
instant sees it as it was.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q


def active_q(t: datetime) -> Q:
    return (
        Q(starts_at__lte=t)
        & (Q(ends_at__isnull=True) | Q(ends_at__gt=t))
        & (Q(revoked_at__isnull=True) | Q(revoked_at__gt=t))
    )


def is_active(starts_at: datetime, ends_at: datetime | None, revoked_at: datetime | None, t: datetime) -> bool:
    return starts_at <= t and (ends_at is None or ends_at > t) and (revoked_at is None or revoked_at > t)
