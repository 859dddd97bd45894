"""An entitlement's history as people read it: who, when, why, and which fields changed.

The triggers store whole-row snapshots; the change list is the difference between consecutive
snapshots of the same entitlement, so bulk writes outside the services show up too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from entitlements.models import EntitlementHistory

# Bookkeeping columns: they change on every write and say nothing about the promise.
IGNORED = frozenset({"id", "uuid", "version", "created_at", "updated_at"})


def _name(column: str) -> str:
    return column[:-3] if column.endswith("_id") else column


def diff(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if before is None:
        return {}
    keys = (set(before) | set(after)) - IGNORED
    return {
        _name(k): {"from": before.get(k), "to": after.get(k)} for k in sorted(keys) if before.get(k) != after.get(k)
    }


def history_for(entitlement_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """History entries for several entitlements in one query, oldest first."""
    rows = (
        EntitlementHistory.objects.filter(entitlement_id__in=list(entitlement_ids))
        .order_by("entitlement_id", "pk")
        .values_list("entitlement_id", "op", "version", "snapshot", "actor__username", "reason", "at")
    )
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    previous: dict[int, dict[str, Any]] = {}
    for ent_id, op, version, snapshot, actor, reason, at in rows:
        out[ent_id].append(
            {
                "op": op,
                "version": version,
                "actor": actor,
                "reason": reason,
                "at": at,
                "changes": diff(previous.get(ent_id), snapshot),
            }
        )
        previous[ent_id] = snapshot
    return out
