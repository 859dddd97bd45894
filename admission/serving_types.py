"""The serving path's requests and answers, and a scope's plan: the types reserve (core.py) and
complete (settle.py) both speak, in either mode (the web tier's admission.services, admission.library).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from admission.backends.base import Scope
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot

Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ReserveRequest:
    request_id: str
    tenant: str
    project: str
    model: str
    region: str
    traffic_class: str
    prompt_tokens: int
    cached_prompt_tokens: int
    max_output_tokens: int | None
    overflow: str | None = None  # "allow" | "deny" (issue 36.1); None: the entitlement's default


# A reserve's `overflow` (docs/contract.md §5 "Spillover"), and what a spilled admission says it is.
OVERFLOWS = ("allow", "deny")
SPILLOVER = "spillover"


@dataclass(frozen=True)
class CompleteRequest:
    reservation_id: str
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    status: str
    ttft_ms: float | None
    e2e_ms: float | None


@dataclass(frozen=True)
class Decision:
    status: int  # 200 admit, 429 throttle
    body: dict[str, Any]
    # The remaining quota (docs/contract.md §5), as response headers: on every answer the store made (admit
    # or throttle, replays too); none where no store was asked (not entitled, outside the envelope,
    # unplaced, the store down), as there is no bucket state to tell.
    headers: dict[str, str] = field(default_factory=dict)


# The remaining-quota headers' static part and names (core.quota_names).
QuotaNames = tuple[dict[str, str], tuple[str, ...]]


@dataclass(frozen=True)
class Plan:
    params: ScopeParams
    scope: Scope
    meta_tail: str  # the meta's static JSON members and its closing brace
    event_head: dict[str, Any]  # the static fields of this scope's admit / throttle events
    quota: QuotaNames  # the remaining-quota headers' static part and names (quota_names)


PlanFor = Callable[[Snapshot, ScopeParams, PoolParams, str, tuple[str, str, str, str]], Plan]
