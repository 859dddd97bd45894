"""What a backend stores and decides, shared by the Redis scripts and the in-process backend.

Both backends take the same `ReserveOp` / `CompleteOp` and must give the same answers; the
decision rule lives in `decide()` here and is mirrored line for line in `lua/lib.lua`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from admission.backends import inputs
from admission.backends.fair import FAIR_FORGET_WT, decayed, fair_ok  # noqa: F401 - the stores' one import
from capacity import periods
from entitlements import reasons

RESERVED, SHARED, BEST_EFFORT = "reserved", "shared", "best_effort"
NO_OUTPUT_CAP = 2**53  # exact as a double, so the Lua side reads the same number


class StoreUnavailable(Exception):
    """The enforcement store did not answer (connection refused, timeout)."""


def new_epoch() -> str:
    """A revocation epoch: opaque, compared for equality only, never reused (a store restarted
    without its data, or a new in-process store, cannot bring back an old one)."""
    return "b" + secrets.token_hex(8)


class EpochChanged(Exception):
    """The token-revocation epoch the caller's token check was made under is no longer the store's
    (a token was revoked, a role removed, a user deactivated, or the store lost its data): nothing
    was written; verify the token again and ask anew under `current` (docs/serving-path-faults.md)."""

    def __init__(self, current: str) -> None:
        super().__init__(current)
        self.current = current


@dataclass(frozen=True)
class Bucket:
    key: str
    rate: float  # wt/s
    depth: float  # wt


# Retry advice for the reasons whose wait does not follow from a bucket's refill.
RETRY_DEFAULTS: dict[str, int] = {
    r: reasons.REASONS[r].default_retry_after_s
    for r in (reasons.CONCURRENCY_LIMIT, reasons.RECLAIMED, reasons.PLATFORM_CAPACITY)
}


@dataclass(frozen=True)
class Period:
    """A period budget (issue 23): `limit` in the scope's budget unit per local day or month.
    `key` is the key's stem: the store appends ':<period id>' (capacity.periods.period_id), so
    the bucket resets by changing key at the boundary and never refills in between."""

    kind: str  # capacity.periods.DAILY / MONTHLY
    key: str
    limit: float


@dataclass(frozen=True)
class Limits:
    """A scope's period budgets and request-rate bucket (issue 23, docs/contract.md §5)."""

    unit: str  # wt, tokens or requests: what a reserve's `units` and a complete's actual count
    tz: str  # IANA zone the periods' boundaries are in
    periods: tuple[Period, ...] = ()
    rps: Bucket | None = None  # request-count token bucket: rate max_rps, depth burst (requests)


@dataclass(frozen=True)
class Share:
    """Lending limits and fair share for a borrowing scope (issue 36.3, docs/contract.md §5).

    `lend`: the pool's lend bucket (rate: the pool's rate less what lenders with a lending limit
    keep back, depth 60 s of it); every borrowed admission takes its cost from it, so borrowed
    tokens never pass the lenders' limits. None: no lender in the pool limits its lending.
    `fair`: the pool's fair-share table, one entry per borrowing scope (`member`): its borrowed
    tokens in the window (each token counts e^(−age / window_s)), its `weight`, and until when it
    is active (`active_s` after its last borrowed attempt, admitted or refused).
    The rule (admission.backends.fair): the room borrowers contend for is what the active borrowers hold
    (their borrowed tokens in the window) plus what is left to lend now (the pool above the reclaim
    margin, within the lend bucket); beyond its weight's share of it a borrower is refused only while
    the room it would take is owed to more-deserving active borrowers. Alone, a borrower may take all of
    it; while lendable room is plentiful nobody is held back; when it is scarce, each active borrower
    (one its own limit does not hold back) gets room in proportion to its weight.
    """

    lend: Bucket | None
    fair: str
    member: str
    weight: float
    window_s: float
    active_s: float


@dataclass(frozen=True)
class Lends:
    """An own-bucket admission's charge to its pool's lend bucket (issue 36.3, docs/lending.md), set on
    every scope of a pool whose lenders limit lending. The lend bucket fills at what is lendable (unsold
    room, unlimited lenders' rates, limited lenders' limits); charging it with the pool's own use makes
    it hold what is idle AND lendable, per lender: a scope without a limit pays its whole cost there; a
    limited one (`keep`: its keep-back bucket, (CU − limit) × R wt/s, as deep as its own bucket) pays
    from the keep-back first and only the rest there. These charges never refuse (lenders are never
    blocked): the lend bucket may go into debt, bounded at one depth as every bucket's."""

    lend: Bucket
    keep: Bucket | None = None


def lender_split(cost: float, keep_l: float) -> float:
    """What a limited lender's own admission takes from its keep-back bucket (the rest goes to the lend
    bucket): as much of the cost as the keep-back holds. Mirrored in lua/reserve.lua."""
    return min(cost, keep_l) if keep_l > 0 else 0.0


def settled_part(delta: float, est: float, charged: float) -> float:
    """The part of a reservation's settlement (`delta` = estimate − actual: a refund when positive, an
    overrun's charge when negative) that goes back to an account the reserve charged `charged` of its
    `est`: the same proportion, so an account charged the whole estimate settles the whole difference,
    as the own bucket does. Mirrored in lua/complete.lua."""
    return delta * charged / est if est > 0 else 0.0


@dataclass(frozen=True)
class Spill:
    """A scope's spillover (issue 36.1, docs/spillover.md): another pool of the same model and tenant
    that serves a request its own bucket is short for. Every key here is under the TARGET pool's hash
    tag (`tag`), so the second script call that charges a spill touches one slot: the spill budget
    (`bucket`: budget CU × R wt/s, 60 s deep), the target pool's bucket and lend bucket, the
    in-flight zset of spilled reservations and their records.

    `allow`: the entitlement's default for a reserve that does not say `overflow`."""

    tag: str
    pool_id: int
    slug: str
    bucket: Bucket
    pool: Bucket
    margin: float
    degraded: bool
    inflight_key: str
    lend: Bucket | None = None
    allow: bool = True


@dataclass(frozen=True, eq=False)
class Scope:
    """What every reserve in one scope shares while a snapshot lasts: built once per snapshot so
    the hot path only adds the per-request values (and a backend may cache its wire form of it,
    keyed by identity: `eq=False`)."""

    inflight_key: str
    max_concurrency: int
    traffic_class: str
    own: Bucket
    pool: Bucket
    borrow: Bucket | None  # None: this entitlement may not borrow
    margin: float  # borrowers need pool level − cost ≥ margin
    degraded: bool  # pool health-scaled rate below what is sold
    reserved_floor: float  # ≤ 0: how deep reserved may take a degraded pool
    ttl_s: float
    idem_ttl_s: int
    w_out: float
    w_cached: float
    retry_defaults: dict[str, int] = field(default_factory=lambda: RETRY_DEFAULTS)
    max_output: int = NO_OUTPUT_CAP  # the envelope's max output tokens: settled output is capped here
    limits: Limits | None = None  # period budgets and request rate; None: neither
    # The pool's key prefix with its hash tag (admission.keys.tag): the reservation records, the
    # pool's set of in-flight zsets live under it. "": the backend's own prefix.
    tag: str = ""
    share: Share | None = None  # a borrowing scope's lending limits and fair share (issue 36.3)
    spill: Spill | None = None  # where the scope spills over when its own bucket is short (issue 36.1)
    lends: Lends | None = None  # its own admissions' charge to the pool's lend bucket (issue 36.3)


@dataclass(frozen=True, slots=True)
class ReserveOp:
    """One reserve. `reservation_id` is derived from the request's identity (tenant and
    request_id, see services.reservation_id), so it is also the idempotency key: the same
    request finds its stored answer under it, and one record serves both."""

    scope: Scope
    reservation_id: str
    cost: float
    meta: str  # JSON carried to the complete / expiry events
    units: float = 0.0  # the estimate in the budget's unit (scope.limits.unit): wt, tokens or 1 request
    epoch: str | None = None  # the revocation epoch the token was verified under; None: no check (library mode)
    quota: bool = True  # answer with the remaining quota (Answer.quota), read in the same store call
    # A spill may follow (issue 36.1): the scope has a spillover and the request allows it. Then a throttle
    # on the own bucket's shortfall is not recorded as final: the record says 'S|<the own throttle>'
    # (Answer.handoff) and the caller asks the target pool with SpillOp; every retry of the request is
    # sent there again, so it is decided by the spill path once and only once (docs/spillover.md).
    overflow: bool = False


@dataclass(frozen=True, slots=True)
class SpillOp:
    """The second call of a spilled reserve, on the target pool's tag (Spill). `fallback`: the own
    throttle answer ('T|reason|retry[|limit]') the request gets when the spill cannot take it.
    `reservation_id`: the request's record name + SPILLED (its record under the target's tag)."""

    spill: Spill
    reservation_id: str
    cost: float
    meta: str
    fallback: str
    ttl_s: float
    idem_ttl_s: int
    w_out: float
    w_cached: float
    max_output: int


# A spilled reservation's record name: the request's own name with this suffix, so it never collides
# with the request's hand-off marker (a target in the same pool shares the tag).
SPILLED = ":s"


def has_rps(s: Scope) -> bool:
    """The scope has a request-rate bucket (reserve.lua: ARGV 35, its depth, > 0), so the store's
    remaining-quota answer carries the request pair."""
    return s.limits is not None and s.limits.rps is not None and s.limits.rps.depth > 0


@dataclass(frozen=True)
class Lost:
    """What a signed reservation id says about its reservation, for a store that has forgotten it:
    settle against these buckets (the actual cost is charged: the reserve's debit was lost with
    the record, they are written by one script), unless it is past `expires` (then it stands as
    expired). `answer` is the reserve answer a replay of the request gets from then on."""

    charged: Bucket
    pool: Bucket
    w_out: float
    w_cached: float
    max_output: int
    estimate: float
    expires: float  # 0: never (a fail-open admission)
    answer: str
    # Period budgets (issue 23): the scope's, and when the reservation was made (its expiry less its
    # TTL; 0: a fail-open admission, charged now): the actual use is charged to that time's periods.
    limits: Limits | None = None
    reserved_at: float = 0.0


@dataclass(frozen=True)
class Where:
    """Every key a complete may touch, named from the signed id (Redis Cluster: a script gets all
    its keys in KEYS and builds none): the pool's tag, the scope's in-flight zset, the bucket that
    paid, the pool's bucket, and the scope's period budgets when it has any."""

    tag: str
    inflight: str = ""  # "" (a hand-built op): the store answers with the record's own keys
    charged: str = ""
    pool: str = ""
    limits: Limits | None = None
    # Issue 36.3: the pool's lend bucket, fair-share table and the scope's keep-back bucket where its
    # lenders limit lending (the record says which of them the reserve charged; () : none).
    lending: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompleteOp:
    reservation_id: str
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    status: str
    idem_ttl_s: int
    lost: Lost | None = None
    where: Where | None = None  # None: a store that keeps its own index (the in-process one)
    epoch: str | None = None  # as ReserveOp.epoch


@dataclass(frozen=True)
class Answer:
    """A reserve answer as stored for idempotent replay: 'A|rid|wt|source|expires' or 'T|reason|retry'."""

    raw: str
    replay: bool
    expired_metas: list[str]
    retried: bool = False  # the store was asked again after an error: a first attempt may have run unseen
    settled: bool = False  # a replay of a reservation already completed or expired
    in_flight: int = 0  # a new admit: the scope's reservations in flight right after it (the store's count)
    quota: str | None = None  # the remaining quota after this answer (quota_raw's form; None: not asked for)

    @property
    def admitted(self) -> bool:
        return self.raw.startswith("A|")

    @property
    def handoff(self) -> bool:
        """The own bucket was short and a spill may follow: ask the target (SpillOp)."""
        return self.raw.startswith("S|")

    def parts(self) -> list[str]:
        return self.raw.split("|")


@dataclass(frozen=True)
class Settled:
    result: dict[str, Any]
    replay: bool
    meta: str | None
    retried: bool = False
    lost: bool = False  # the store had forgotten it: settled from the signed id (op.lost)


def decide(op: ReserveOp, own_l: float, pool_l: float, borrow_l: float) -> tuple[str, str, float]:
    """→ ("admit", source, 0) or ("throttle", reason, seconds until the bucket would have room).

    Own-bucket admissions of lenders (reserved, shared) are never refused by the pool bucket
    unless supply is degraded; borrowers (and best_effort, which is never guaranteed) need pool
    room above the reclaim margin, so a lender admitting at its rate always gets through. Reads the
    scope's inputs by the names reserve.lua reads them (admission.backends.inputs).
    """
    c, v = op.cost, inputs.of(op.scope)
    pool_ok_for_borrow = room_above_margin(pool_l, c, v["margin"])
    degraded = v["degraded"]
    borrow_reason = reasons.PLATFORM_CAPACITY if degraded else reasons.RECLAIMED
    cls = v["traffic_class"]
    if cls == RESERVED:
        if degraded and pool_l - c < v["reserved_floor"]:
            return "throttle", reasons.PLATFORM_CAPACITY, 0.0
        if own_l >= c:
            return "admit", "entitlement", 0.0
        return "throttle", reasons.QUOTA_EXCEEDED, _wait(c - own_l, v["own_rate"])
    if own_l >= c:
        if cls == SHARED:
            if degraded and pool_l - c < 0:
                return "throttle", reasons.PLATFORM_CAPACITY, 0.0
            return "admit", "entitlement", 0.0
        return ("admit", "entitlement", 0.0) if pool_ok_for_borrow else ("throttle", borrow_reason, 0.0)
    if v["borrow_depth"] <= 0:
        return "throttle", reasons.QUOTA_EXCEEDED, _wait(c - own_l, v["own_rate"])
    if borrow_l < c:
        wait = _wait(c - max(own_l, borrow_l), v["own_rate"] + v["borrow_rate"])
        return "throttle", reasons.QUOTA_EXCEEDED, wait
    if not pool_ok_for_borrow:
        return "throttle", borrow_reason, 0.0
    return "admit", "borrowed", 0.0


def room_above_margin(pool_l: float, cost: float, margin: float) -> bool:
    """The rule every admission that is not a lender's own needs (borrowed, best_effort, spilled): the
    pool keeps its reclaim margin after it, so a lender's own-bucket admission always finds room.
    Mirrored by `room_above_margin` in lua/lib.lua."""
    return pool_l - cost >= margin


# Which own-bucket throttles a spill may replace (issue 36.1): the token bucket (or borrowing) came up
# short; budgets, the request rate, concurrency and a degraded pool are not an empty own bucket.
SPILLABLE = frozenset({reasons.QUOTA_EXCEEDED, reasons.RECLAIMED})


def spill_decide(op: SpillOp, spill_l: float, pool_l: float, lend_l: float | None) -> bool:
    """A spilled admission (issue 36.1): the spill budget has room, the target pool keeps its reclaim
    margin after it (the borrowers' rule: lenders' own buckets in the target are never touched) and,
    where the target's lenders limit lending, the lend bucket has room; never into a degraded pool.
    Mirrored in lua/spill.lua."""
    sp, c = op.spill, op.cost
    if sp.degraded or spill_l < c or not room_above_margin(pool_l, c, sp.margin):
        return False
    return lend_l is None or lend_l >= c


def budget_units(unit: str, wt: float, prompt_tokens: int, output_tokens: int) -> float:
    """What one request costs a budget: its weighted tokens, its plain tokens (prompt + output, as
    Atlas counts upstream total_tokens; cached prompt tokens count) or 1 request. Mirrored in complete.lua."""
    if unit == periods.TOKENS:
        return float(prompt_tokens + output_tokens)
    if unit == periods.REQUESTS:
        return 1.0
    return wt


def spent(used: float, units: float, limit: float) -> bool:
    """A period budget refuses a request that would take it over its limit."""
    return used + units > limit


def lost_charges(lost: Lost, t: float) -> list[tuple[str, float, float]]:
    """(period key, limit, period end) a forgotten reservation's actual use is charged to: the
    periods containing the moment it was made (`t` for a fail-open one), by the store's clock."""
    lim = lost.limits
    if lim is None:
        return []
    at = lost.reserved_at or t
    out = []
    for per in lim.periods:
        pid, _, end = periods_at(per.kind, lim.tz, at)[1]
        out.append((f"{per.key}:{pid}", per.limit, end))
    return out


def bounded_used(used: float, limit: float) -> float:
    """A period bucket's use within [0, 2 × limit]: its debt (use above the limit from overruns)
    is bounded at one depth, like a rate bucket's; refunds never take it below nothing."""
    return 0.0 if used < 0 else 2 * limit if used > 2 * limit else used


_PERIODS: dict[tuple[str, str], tuple[float, float, list[tuple[str, float, float]]]] = {}


def periods_at(kind: str, tz: str, t: float) -> list[tuple[str, float, float]]:
    """[(period id, start, end)] × 3 (previous, current, next) around epoch `t`, cached while `t`
    stays in the current period (a zone lookup costs more than the rest of a reserve's Python)."""
    got = _PERIODS.get((kind, tz))
    if got is not None and got[0] <= t < got[1]:
        return got[2]
    ps = periods.periods_around(kind, t, tz)
    _PERIODS[(kind, tz)] = (ps[1][1], ps[1][2], ps)
    return ps


def bounded(level: float, depth: float) -> float:
    """A bucket's level within [−depth, depth]: debt is bounded at one depth (docs/contract.md §5), so one
    oversized overrun cannot lock a scope or its pool for good. Mirrored by `bounded` in lua/lib.lua."""
    return -depth if level < -depth else depth if level > depth else level


def _wait(deficit: float, rate: float) -> float:
    return deficit / rate if rate > 0 else 3600.0


def retry_after_s(reason: str, wait: float, defaults: dict[str, int]) -> int:
    if reason == reasons.BUDGET_EXHAUSTED:
        return max(1, int(-(-wait // 1)))  # to the period boundary, however far
    if reason == reasons.QUOTA_EXCEEDED:
        return max(1, min(3600, int(-(-wait // 1))))
    return defaults[reason]


def borrowed_meta(meta: str) -> str:
    """A borrowed admission's record meta (a JSON object) with `source_kind: borrowed`, so its complete or
    expiry event is counted as borrowed (reserve.lua writes the same bytes)."""
    return meta[:-1] + ',"source_kind":"borrowed"}'
