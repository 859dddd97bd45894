"""The gateway snapshot (docs/contract.md §5): every entitlement active now with what enforcement needs.

Built from two values() queries and no model instances, because gateways poll it; the version
is a hash of the content, so an unchanged snapshot answers 304 to `If-None-Match`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from capacity.deliverable import PoolSupply, deliverable
from capacity.units import cu_to_wt_per_s
from entitlements.limits import LIMIT_FIELDS
from entitlements.models import Entitlement
from entitlements.selectors import snapshot_entitlement_rows, snapshot_pool_rows
from entitlements.services import ENVELOPE_FIELDS

# The snapshot nests the envelope; max_concurrency stays at the top level, where gateways enforce it.
ENVELOPE = [f for f in ENVELOPE_FIELDS if f != "max_concurrency"]


SPILL_FIELDS = ("spillover_target__uuid", "spillover_target__pool__slug", "spillover_budget_cu", "overflow")


def _entitlements(at: datetime) -> list[dict[str, Any]]:
    rows = snapshot_entitlement_rows(at, *ENVELOPE, *LIMIT_FIELDS, "lending_limit_cu", "weight", *SPILL_FIELDS)
    out = []
    for r in rows:
        r_wt = r["model__r_wt_per_s"]
        rate = cu_to_wt_per_s(float(r["cu"]), r_wt)
        # The rule admission.params applies: a class that may borrow (only best_effort) with overage
        # borrow. Elsewhere the limit is exported as 0, so no gateway enforces a rate we never apply.
        borrows = r["traffic_class__may_borrow"] and r["overage"] == Entitlement.Overage.BORROW
        borrow_cu = float(r["borrowing_limit_cu"]) if borrows else 0.0
        out.append(
            {
                "uuid": str(r["uuid"]),
                "tenant": r["tenant__slug"],
                "project": r["project__slug"],
                "model": r["model__slug"],
                "region": r["region__slug"],
                "pool": r["pool__slug"],
                "traffic_class": r["traffic_class_id"],
                "cu": float(r["cu"]),
                "rate_wt_per_s": rate,
                "bucket_depth_wt": rate * settings.ADMISSION_BUCKET_DEPTH_S,  # the store's depth (contract §5)
                "w_out": r["model__w_out"],
                "w_cached": r["model__w_cached"],
                "envelope": {k: r[k] for k in ENVELOPE},
                "max_concurrency": r["max_concurrency"],
                "overage": r["overage"],
                "borrowing_limit_cu": borrow_cu,
                "borrowing_limit_wt_per_s": cu_to_wt_per_s(borrow_cu, r_wt),
                # Period budgets and the request rate (issue 23): null = no such limit.
                **{k: r[k] for k in LIMIT_FIELDS},
                # Lending and fair share (issue 36.3): null lending limit = lends all idle room
                # (lenders only); weight 1 unless set (best_effort only, else null).
                "lending_limit_cu": None if r["lending_limit_cu"] is None else float(r["lending_limit_cu"]),
                "lending_limit": None if r["lending_limit_cu"] is None else float(r["lending_limit_cu"]),  # CONTRACT.md
                "weight": (1.0 if r["weight"] is None else r["weight"])
                if r["traffic_class_id"] == "best_effort"
                else None,
                # Spillover (issue 36.1): the target entitlement and its pool, the budget; null: none.
                "spillover": None
                if r["spillover_target__uuid"] is None
                else {
                    "target": str(r["spillover_target__uuid"]),
                    "target_pool": r["spillover_target__pool__slug"],
                    "budget_cu": float(r["spillover_budget_cu"]),
                    "budget": float(r["spillover_budget_cu"]),  # CONTRACT.md §5's name
                },
                "overflow": r["overflow"],
                "version": r["version"],
            }
        )
    return out


def _pools() -> list[dict[str, Any]]:
    rows = snapshot_pool_rows()
    out = []
    for r in rows:
        # physical_cu is kept current by pool_locks.pool_refresh; as one "replica" of that size it
        # feeds the same deliverable formula the pool pages use, without loading zones.
        supply = PoolSupply(
            replicas_per_zone=(1,),
            cu_per_replica=float(r["physical_cu"]),
            maintenance_pct=r["maintenance_pct"],
            safety_pct=r["safety_pct"],
            fragmentation_pct=r["fragmentation_pct"],
            reserve_held_cu=float(r["reserve_held_cu"]),
        )
        cu = round(deliverable(supply).deliverable, 3)
        out.append(
            {
                "slug": r["slug"],
                "model": r["model__slug"],
                "region": r["region__slug"],
                "deliverable_cu": cu,
                "rate_wt_per_s": cu_to_wt_per_s(cu, r["model__r_wt_per_s"]),
            }
        )
    return out


# Blocks a higher app adds to the snapshot, by name: entitlements may not import them (layers), so
# they register a builder at ready(). admission adds "admission": its enforcement parameters as its
# serving path derives them, which a library-mode gateway (admission.library) enforces verbatim.
EXTENSIONS: dict[str, Callable[[datetime], Any]] = {}


def build_snapshot(at: datetime | None = None) -> dict[str, Any]:
    t = at or timezone.now()
    content = {"entitlements": _entitlements(t), "pools": _pools()}
    for name, block in EXTENSIONS.items():
        content[name] = block(t)
    canonical = json.dumps(content, sort_keys=True, cls=DjangoJSONEncoder, separators=(",", ":"))
    return {"version": hashlib.sha256(canonical.encode()).hexdigest()[:32], "generated_at": t, **content}


class Stamp(Protocol):
    """Says, without a build, that nothing the snapshot reads has changed (issue 35.1). `read` is
    all a 304 costs. After a build, `vouch(key)` names the key that build stands for and until when
    (time.monotonic()): time moves the snapshot with no write (windows start and end), so no key
    stands for ever; None: the build may be older than `key`, don't remember it."""

    def read(self) -> Hashable: ...

    def vouch(self, key: Hashable) -> tuple[Hashable, float] | None: ...


# Registered by a higher app at ready(), as EXTENSIONS (admission: its trigger-kept change counters).
# None: every poll builds.
STAMP: list[Stamp] = []
_memo: tuple[Hashable, str, float] | None = None  # (key, version, until) of the last build vouched for


def stamp_read() -> Hashable | None:
    return STAMP[0].read() if STAMP else None


def remembered(key: Hashable | None) -> str | None:
    """The version built under this very key, while its vouch lasts; None: build."""
    m = _memo
    if key is None or m is None or m[0] != key or time.monotonic() >= m[2]:
        return None
    return m[1]


def remember(key: Hashable | None, version: str) -> None:
    global _memo
    vouched = STAMP[0].vouch(key) if STAMP and key is not None else None
    # One entry: gateways poll for the current version, an older one is only ever answered 200.
    _memo = None if vouched is None else (vouched[0], version, vouched[1])


def forget() -> None:
    global _memo
    _memo = None


def if_none_match(header: str, version: str) -> bool:
    """True when an `If-None-Match` header names this version (or `*`); weak tags count too."""
    tags = [t.strip() for t in header.split(",") if t.strip()]
    return any(t == "*" or t.removeprefix("W/").strip('"') == version for t in tags)
