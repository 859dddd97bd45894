"""The snapshot's spillover parameters (issue 36.1, docs/spillover.md), read apart from the scope sums.

Few entitlements name a spillover target, so they are read as rows (one query, only those rows) and
attached to the scopes admission.scope_sums derived, at the same instant: a scope's spillover goes to
the pool of its lowest-pk spilling entitlement's target; the budgets of its entitlements spilling to
that pool add up; the default `overflow` is that entitlement's. Only entitlements active at the
instant count, and only targets that are active then too (a target not yet started or ended or
revoked serves nothing).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import FloatField, Q, TextField

from admission.snapshot_reads import Epoch, FloatCast, TextCast
from admission.snapshot_types import ScopeParams, SpillSpec
from entitlements.models import Entitlement

Key = tuple[str, str, str, str, str]
Row = tuple[Any, ...]


def read(t: datetime) -> list[Row]:
    """(key, starts, ends, target pool, budget CU, R, overflow, target uuid, target starts, target ends) by pk."""
    live = Q(revoked_at__isnull=True) & (Q(ends_at__isnull=True) | Q(ends_at__gt=t))
    qs = (
        Entitlement.objects.filter(live, spillover_target__isnull=False, spillover_target__revoked_at__isnull=True)
        .annotate(
            starts=Epoch("starts_at"),
            ends=Epoch("ends_at"),
            t_starts=Epoch("spillover_target__starts_at"),
            t_ends=Epoch("spillover_target__ends_at"),
            budget=FloatCast("spillover_budget_cu", FloatField()),
            t_uuid=TextCast("spillover_target__uuid", TextField()),
        )  # fmt: skip
        .order_by("pk")
        .values_list(
            "tenant__slug",
            "project__slug",
            "model__slug",
            "region__slug",
            "traffic_class_id",
            "starts",
            "ends",
            "spillover_target__pool_id",
            "budget",
            "model__r_wt_per_s",
            "overflow",
            "t_uuid",
            "t_starts",
            "t_ends",
        )  # fmt: skip
    )
    return [((ten, proj or "", m, reg, cls), *rest) for ten, proj, m, reg, cls, *rest in qs]


def _active(starts: float, ends: float | None, t: float) -> bool:
    return starts <= t and (ends is None or ends > t)


def attach(scopes: dict[Key, ScopeParams], rows: list[Row], t: float) -> dict[Key, ScopeParams]:
    """`scopes` with their spillover at epoch second `t` (the scopes without one are the same objects)."""
    got: dict[Key, SpillSpec] = {}
    for key, starts, ends, pool, budget, r, overflow, target, t_starts, t_ends in rows:
        if key not in scopes or not _active(starts, ends, t) or not _active(t_starts, t_ends, t):
            continue
        have = got.get(key)
        if have is None:
            got[key] = SpillSpec(pool, budget * r, overflow == Entitlement.Overflow.ALLOW, str(UUID(target)))
        elif have.target_pool_id == pool:
            got[key] = dataclasses.replace(have, rate=have.rate + budget * r)
    if not got:
        return scopes
    return {k: dataclasses.replace(sp, spillover=got[k]) if k in got else sp for k, sp in scopes.items()}


def next_boundary(rows: list[Row], t: float) -> float | None:
    """The next instant after `t` at which a spilling entitlement or its target starts or ends."""
    times = [x for row in rows for x in (row[1], row[2], row[8], row[9]) if x is not None and x > t]
    return min(times) if times else None
