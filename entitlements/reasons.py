"""The reason-code registry (docs/contract.md §4) and the traffic classes, as data.

Migration 0002 loads both into their tables; admission and the web read these constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reason:
    code: str
    responsible: str
    when: str
    default_retry_after_s: int


NOT_ENTITLED = "NOT_ENTITLED"
OUTSIDE_ENVELOPE = "OUTSIDE_ENVELOPE"
CONCURRENCY_LIMIT = "CONCURRENCY_LIMIT"
QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
RECLAIMED = "RECLAIMED"
PLATFORM_CAPACITY = "PLATFORM_CAPACITY"
PLACEMENT = "PLACEMENT"
ADMISSION_UNAVAILABLE = "ADMISSION_UNAVAILABLE"
IMPORTED = "IMPORTED"

REASONS: dict[str, Reason] = {
    r.code: r
    for r in [
        Reason(NOT_ENTITLED, "tenant", "no active entitlement for that scope and time", 300),
        Reason(OUTSIDE_ENVELOPE, "tenant", "prompt or max output above the envelope", 0),
        Reason(CONCURRENCY_LIMIT, "tenant", "in-flight reservations at the entitlement's cap", 1),
        Reason(
            QUOTA_EXCEEDED,
            "tenant",
            "the entitlement's token bucket is empty and borrowing is not allowed or used up",
            1,
        ),
        Reason(
            BUDGET_EXHAUSTED,
            "tenant",
            "the entitlement's daily or monthly budget is spent; retry at the period boundary",
            3600,
        ),
        Reason(RECLAIMED, "platform policy", "borrowing is allowed, but lenders are using their capacity now", 5),
        Reason(PLATFORM_CAPACITY, "platform", "supply is degraded below what was promised", 10),
        Reason(PLACEMENT, "platform", "no pool serves that model in that region", 300),
        Reason(ADMISSION_UNAVAILABLE, "platform", "the enforcement store is down and the class fails closed", 5),
        # Issue 47: a history import's `throttled` counts come from another gateway, which recorded the
        # refusal but not its cause: blaming the tenant or the platform would need evidence it does not
        # carry, so neither is. Never given by admission (so no Retry-After).
        Reason(
            IMPORTED, "unknown", "refused by another gateway before the move (history import): cause not recorded", 0
        ),
    ]
}

TRAFFIC_CLASSES = [
    # slug, name, guaranteed, may_lend, may_borrow, counts_as_sold, shed_order, description
    ("best_effort", "Best effort", False, False, True, False, 1, "no guarantee; only borrows idle capacity"),
    # docs/contract.md §5: only best_effort borrows; shared lends but never borrows.
    ("shared", "Shared", True, True, False, True, 2, "guaranteed; lends idle capacity, never borrows"),
    ("reserved", "Reserved", True, True, False, True, 3, "guaranteed; idle capacity may be lent and is reclaimed"),
]


def ensure_registry(reason_model: Any, traffic_class_model: Any) -> None:
    """Load both tables (idempotent). Takes the model classes so migrations can pass historical ones."""
    for r in REASONS.values():
        reason_model.objects.update_or_create(
            code=r.code,
            defaults={"responsible": r.responsible, "when": r.when, "default_retry_after_s": r.default_retry_after_s},
        )
    for slug, name, guaranteed, lend, borrow, sold, shed, desc in TRAFFIC_CLASSES:
        traffic_class_model.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "guaranteed": guaranteed,
                "may_lend": lend,
                "may_borrow": borrow,
                "counts_as_sold": sold,
                "shed_order": shed,
                "description": desc,
            },
        )
