"""What an entitlement bought over a period, from its history (one public door, issue 34.1).

Every write of an entitlement leaves a snapshot in its history (by database trigger), so an amendment
changes the CU from the moment it was made, and a window or a revocation stops it. The evidence
statement, reconciliation, the usage meters and anything else that asks "what was bought then" read it
here, never from the row as it is now.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.utils.dateparse import parse_datetime

from entitlements.models import Entitlement, EntitlementHistory


@dataclass(frozen=True)
class Step:
    """CU bought over [start, end)."""

    start: datetime
    end: datetime
    cu: Decimal


def when(value: Any) -> datetime | None:
    """A snapshot's time (a datetime or its ISO text, naive read as UTC) in UTC; None when empty."""
    if value in (None, ""):
        return None
    t = value if isinstance(value, datetime) else parse_datetime(str(value))
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _in_force(snap: dict[str, Any]) -> tuple[datetime | None, datetime | None, Decimal]:
    """(active from, active until, CU) of one history snapshot; until is None when open-ended."""
    stops = [t for t in (when(snap.get("ends_at")), when(snap.get("revoked_at"))) if t is not None]
    return when(snap.get("starts_at")), min(stops) if stops else None, Decimal(str(snap.get("cu") or 0))


def history_of(ent: Entitlement) -> list[tuple[Any, dict[str, Any]]]:
    """The entitlement's (at, snapshot) history rows, oldest first."""
    return list(
        EntitlementHistory.objects.filter(entitlement_id=ent.pk).exclude(op="delete").values_list("at", "snapshot")
    )


def histories(ents: list[Entitlement]) -> dict[int, list[tuple[Any, dict[str, Any]]]]:
    """Entitlement pk → its history rows, oldest first, for many entitlements in one query."""
    rows: dict[int, list[Any]] = defaultdict(list)
    qs = EntitlementHistory.objects.filter(entitlement_id__in=[e.pk for e in ents]).exclude(op="delete")
    for pk, at, snap in qs.order_by("entitlement_id", "pk").values_list("entitlement_id", "at", "snapshot"):
        rows[pk].append((at, snap))
    return rows


def bought_steps(ent: Entitlement, start: datetime, end: datetime, history: list[Any] | None = None) -> list[Step]:
    """The CU bought at every moment of [start, end), from the history.

    The first snapshot governs back to its own window's start (a grant may be backdated); every later
    one governs from the moment it was written. Within each, only its window [starts_at, min(ends_at,
    revoked_at)) counts. `history`: the entitlement's (at, snapshot) rows in order, when the caller read
    many entitlements' at once (`histories`)."""
    rows = history if history is not None else history_of(ent)
    if not rows:  # no trigger ran (rows written before the triggers existed): the row as it is now
        rows = [
            (
                ent.created_at,
                {"starts_at": ent.starts_at, "ends_at": ent.ends_at, "revoked_at": ent.revoked_at, "cu": ent.cu},
            )
        ]
    steps: list[Step] = []
    for i, (at, snap) in enumerate(rows):
        lo = start if i == 0 else max(start, when(at) or start)
        hi = end if i == len(rows) - 1 else min(end, when(rows[i + 1][0]) or end)
        active_from, active_until, cu = _in_force(snap)
        a = max(lo, active_from or lo)
        b = min(hi, active_until or hi)
        if b > a and cu > 0:
            if steps and steps[-1].end == a and steps[-1].cu == cu:
                steps[-1] = Step(steps[-1].start, b, cu)
            else:
                steps.append(Step(a, b, cu))
    return steps


def cu_at(steps: list[Step], t: datetime) -> Decimal:
    """The CU bought at the moment t (0 outside every step)."""
    for s in steps:
        if s.start <= t < s.end:
            return s.cu
    return Decimal(0)


def cu_hours(steps: list[Step]) -> float:
    """CU-hours bought over the steps."""
    return sum(float(s.cu) * (s.end - s.start).total_seconds() / 3600 for s in steps)


def seconds_bought(steps: list[Step]) -> float:
    """How many seconds of the steps' period something was bought."""
    return sum((s.end - s.start).total_seconds() for s in steps)
