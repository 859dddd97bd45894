"""Commitment terms on entitlements (docs/contract.md §10): when a commitment ends, and the one rule it
brings — before it ends, the CU may not be amended below what was committed (the tenant pays for it whether
used or not). The end is the quote's own (capacity.quotes): whole terms from the start that cover the window.
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from capacity.quotes import HOURS_PER_MONTH, add_months, window_hours
from entitlements.models.prices import TERM_MONTHS


def checked_term(term: Any) -> str:
    if not isinstance(term, str) or term not in TERM_MONTHS:
        raise ValidationError({"term": f"unknown term: one of {', '.join(TERM_MONTHS)}"})
    return term


def commitment_end(term: str, start: datetime, end: datetime | None) -> datetime | None:
    """None for on demand; else the end of the last whole term covering the window (as the quote says)."""
    months = TERM_MONTHS[checked_term(term)]
    if months == 0:
        return None
    terms = max(1, math.ceil(round(window_hours(start, end) / HOURS_PER_MONTH / months, 9)))
    return add_months(start, terms * months)


def check_amend(ent: Any, changes: dict[str, Any], now: datetime | None = None) -> None:
    """A CU below the committed one before `committed_until` is refused, with the date the commitment ends."""
    until = ent.committed_until
    if until is None or "cu" not in changes or (now or timezone.now()) >= until:
        return
    new = Decimal(str(changes["cu"]))
    if new < ent.cu:
        raise ValidationError(
            {
                "cu": f"{ent.cu} CU are committed ({ent.term.replace('_', ' ')}) until {until.date().isoformat()}: "
                f"not below that before {until.date().isoformat()}"
            }
        )
