"""The pool page's "Lending" section (issue 36.3): who lends what, who borrows how much, read from
the snapshot (limits, weights) and the enforcement store (the pool's fair-share table and lend bucket).

Per lender: its lending limit (or "all idle"), the CU it may lend, and its part of the tokens lent in
the window. The store enforces each lender's limit (its own admissions charge the pool's lend bucket, a
limited lender's keep-back bucket first: docs/lending.md) but counts what was lent per pool (the lend
bucket and the borrowers' table), not per lender: which lender's idle room a borrowed token came from
is not recorded. So a lender's part is still the pool's lent tokens pro rata to what each may lend (its
limit, or its CU when it lends all idle), with the pool's unsold room as one more lender ("unsold"). Per
borrower: its weight, its borrowed tokens in the window (60 s exponential, as the fair-share rule
counts them), whether it is active (asked to borrow in the last 10 s) and its share of the borrowed
tokens beside its weight's share of the active borrowers' weights.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from admission import keys, params
from admission.backends import get_backend

log = logging.getLogger(__name__)
LENDERS = ("reserved", "shared")


@dataclass
class Lender:
    scope: str
    traffic_class: str
    cu: float
    lending_limit_cu: float | None  # None: lends all its idle room
    lendable_cu: float
    lent_wt: float = 0.0  # its part of the tokens lent in the window (pro rata to lendable_cu)


@dataclass
class Borrower:
    scope: str
    weight: float
    borrowed_wt: float = 0.0  # borrowed tokens in the window (the fair-share table's count)
    active: bool = False
    share: float = 0.0  # of all borrowed tokens in the window
    weight_share: float | None = None  # its weight ÷ the active borrowers' weights (None: not active)


@dataclass
class PoolLending:
    lenders: list[Lender] = field(default_factory=list)
    borrowers: list[Borrower] = field(default_factory=list)
    unsold_cu: float = 0.0
    unsold_lent_wt: float = 0.0
    lend_rate_cu: float | None = None  # what lenders let borrowers take in all (None: no lender limits it)
    lend_room_wt: float | None = None  # left in the lend bucket now (None: no lend bucket)
    lent_wt: float = 0.0  # borrowed tokens in the window, all borrowers
    window_s: float = 60.0
    store_error: str = ""

    @property
    def any(self) -> bool:
        return bool(self.lenders or self.borrowers)


def pool_lending(pool_id: int) -> PoolLending:
    snap = params.current()
    pool = snap.pools.get(pool_id)
    out = PoolLending(window_s=float(settings.ADMISSION_BUCKET_DEPTH_S))
    if pool is None:
        return out
    r = 0.0
    for (tenant, project, _model, _region, cls), sp in sorted(snap.scopes.items()):
        if sp.pool_id != pool_id:
            continue
        name = f"{tenant}/{project}" if project else tenant
        if cls in LENDERS:
            r = r or _r_of(sp)
            cu = sp.rate / r if r else 0.0
            lendable = cu if sp.lending_limit_cu is None else min(sp.lending_limit_cu, cu)
            out.lenders.append(Lender(name, cls, cu, sp.lending_limit_cu, lendable))
        elif sp.borrow_rate > 0:
            out.borrowers.append(Borrower(sp.key, sp.weight))
    if r == 0.0:
        r = next((_r_of(sp) for sp in snap.scopes.values() if sp.pool_id == pool_id), 0.0)
    if r:
        deliverable_cu = pool.rate / r
        out.unsold_cu = max(0.0, deliverable_cu - sum(x.cu for x in out.lenders))
        if pool.lend_rate is not None:
            out.lend_rate_cu = pool.lend_rate / r
    backend = get_backend()
    t = keys.tag(backend.prefix, pool_id)
    try:
        state = backend.fair_state(keys.fair(t), out.window_s)
        if pool.lend_rate is not None:
            got = backend.level(keys.lend(t))
            out.lend_room_wt = pool.lend_rate * out.window_s if got is None else got
    except Exception as exc:  # noqa: BLE001 - the page shows the rest without the store (down, or a Redis error)
        log.warning("lending section: store read failed", exc_info=True)
        out.store_error = type(exc).__name__
        state = {}
    by_key = {b.scope: b for b in out.borrowers}
    for member, (used, weight, active) in state.items():
        b = by_key.get(member)
        if b is None:  # a borrower no longer in the snapshot whose tokens still count in the window
            b = by_key[member] = Borrower(member, weight)
            out.borrowers.append(b)
        b.borrowed_wt, b.active = used, active
    out.lent_wt = sum(b.borrowed_wt for b in out.borrowers)
    active_w = sum(b.weight for b in out.borrowers if b.active)
    for b in out.borrowers:
        b.share = b.borrowed_wt / out.lent_wt if out.lent_wt else 0.0
        b.weight_share = b.weight / active_w if b.active and active_w else None
    lendable = sum(x.lendable_cu for x in out.lenders) + out.unsold_cu
    for x in out.lenders:
        x.lent_wt = out.lent_wt * x.lendable_cu / lendable if lendable else 0.0
    out.unsold_lent_wt = out.lent_wt * out.unsold_cu / lendable if lendable else 0.0
    for b in out.borrowers:
        b.scope = _label(b.scope)
    return out


def _r_of(sp: Any) -> float:
    """R (wt/s per CU) from the scope's own numbers is not held; the catalogue's is read once."""
    from entitlements.models import ServedModel

    model = sp.key.split(":")[2]
    got = ServedModel.objects.filter(slug=model).values_list("r_wt_per_s", flat=True).first()
    return float(got or 0.0)


def _label(scope_key: str) -> str:
    """'tenant:project:model:region:class' → 'tenant/project' (or the tenant alone)."""
    parts = scope_key.split(":")
    if len(parts) < 2:
        return scope_key
    return f"{parts[0]}/{parts[1]}" if parts[1] else parts[0]
