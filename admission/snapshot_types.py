"""The snapshot's shapes, without Django: admission.params builds them from the database, the
library mode (admission.library) from the portal's `/api/v1/entitlements/snapshot`, and the serving
path (admission.core) reads them the same way in both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from admission.budgets import LimitSpec
from admission.usd import EMPTY, UsdBook


@dataclass(frozen=True)
class PoolParams:
    pool_id: int
    slug: str
    rate: float  # wt/s: deliverable CU × R × healthy/total
    depth: float
    margin: float  # wt of pool room borrowers must leave
    degraded: bool  # the health-scaled rate is below what is sold
    reserved_floor: float  # ≤ 0
    health: tuple[int, int] | None
    # Issue 36.3: wt/s borrowed admissions may take in all (the rate of the pool's lend bucket): the
    # pool's rate less what lenders with a lending limit keep back (CU − lending_limit each, × R).
    # None: no lender in the pool limits its lending (borrowers are held by the pool bucket alone).
    lend_rate: float | None = None


@dataclass(frozen=True)
class SpillSpec:
    """A scope's spillover (issue 36.1, docs/spillover.md): the pool its target entitlement lives in,
    the spill budget's rate (Σ budget CU × R of the scope's entitlements spilling there) and the
    entitlements' default for a reserve that does not say `overflow`."""

    target_pool_id: int
    rate: float  # wt/s
    allow: bool
    target: str  # uuid of the target entitlement (the lowest-pk one's)


@dataclass(frozen=True)
class ScopeParams:
    key: str
    entitlement: str  # uuid of the first active entitlement in the scope
    traffic_class: str
    rate: float
    borrow_rate: float  # 0: this scope may not borrow
    max_prompt_tokens: int
    max_output_tokens: int
    output_p95: int
    max_concurrency: int
    ttft_p99_ms: int
    tpot_p99_ms: int
    w_out: float
    w_cached: float
    pool_id: int
    limits: LimitSpec | None = None  # period budgets and request rate (issue 23, admission.budgets)
    # Issue 36.3: a lender's lending limit in CU (its entitlements' limits add up, an unlimited one
    # counting its CU; None: none of them limits), a borrower's fair-share weight (they add up; 1 each by default).
    lending_limit_cu: float | None = None
    weight: float = 1.0
    spillover: SpillSpec | None = None  # issue 36.1 (admission.spill_params)
    # Issue 36.3: wt/s a lender keeps back from borrowers, Σ (CU − lending_limit) × R over its entitlements
    # that set a limit (its keep-back bucket's rate); 0: it lends all its idle room.
    keep_back: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    scopes: dict[tuple[str, str, str, str, str], ScopeParams]  # (tenant, project|"", model, region, class)
    pools: dict[int, PoolParams]
    placements: frozenset[tuple[str, str]]  # (model, region) some pool serves
    valid_until: float  # time.monotonic()
    version: int
    # Per-scope reserve plans (admission.plans), built on first use and dropped with the snapshot.
    plans: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    usd: UsdBook = EMPTY  # $ budgets and prices (issue 51.3, admission.usd); EMPTY: no tenant has one

    def lookup(self, tenant: str, project: str, model: str, region: str, cls: str) -> ScopeParams | None:
        """A project's own entitlements first, then the tenant-wide ones."""
        if project:
            got = self.scopes.get((tenant, project, model, region, cls))
            if got is not None:
                return got
        return self.scopes.get((tenant, "", model, region, cls))
