"""The serving path's decisions without Django: reserve as both modes run it (complete: settle.py).

The web tier (admission.services: snapshot from the database, keys from settings) and the library
mode (admission.library: snapshot polled from the portal, keys given as arguments) call the same
functions here with the same scripts, so the same request in the same state gets the same answer
in either mode. Everything a function needs from its surroundings is an argument: the snapshot,
the backend, how to sign and verify ids, how to build a scope's plan, where events go.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any

from admission import budgets, keys, usd
from admission.backends.base import (
    BEST_EFFORT,
    RETRY_DEFAULTS,
    SPILLED,
    Bucket,
    Lends,
    ReserveOp,
    Scope,
    Share,
    Spill,
    SpillOp,
    StoreUnavailable,
    has_rps,
)
from admission.idcodec import Claims, record_name
from admission.isotime import iso_utc, now_iso
from admission.serving_types import (
    SPILLOVER,
    Decision,
    Emit,
    Plan,
    PlanFor,
    QuotaNames,
    ReserveRequest,
)
from admission.settle import emit_expired
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot
from entitlements import reasons

# ---- plans: what every reserve in one scope shares while a snapshot lasts --------------------


def spill_target(snap: Snapshot, sp: ScopeParams) -> PoolParams | None:
    """The pool a scope spills over to (issue 36.1), None: no spillover (or the pool is gone)."""
    return snap.pools.get(sp.spillover.target_pool_id) if sp.spillover is not None else None


def _spill(sp: ScopeParams, target: PoolParams | None, p: str, depth_s: float) -> Spill | None:
    so = sp.spillover
    if so is None or target is None:
        return None
    tt = keys.tag(p, target.pool_id)  # every key of the spill under the TARGET pool's hash tag
    lr = target.lend_rate
    return Spill(
        tt, target.pool_id, target.slug, Bucket(keys.spill(tt, sp.key), so.rate, so.rate * depth_s),
        Bucket(keys.pool(tt), target.rate, target.depth), target.margin, target.degraded,
        keys.spill_inflight(tt, sp.key), None if lr is None else Bucket(keys.lend(tt), lr, lr * depth_s), so.allow,
    )  # fmt: skip


def build_plan(
    sp: ScopeParams, pool: PoolParams, p: str, who: tuple[str, str, str, str], *, depth_s: float, ttl_s: float,
    idem_ttl_s: int, target: PoolParams | None = None,
) -> Plan:  # fmt: skip
    """`who`: the (tenant, model, region, class) of the request, which the scope matched exactly;
    `target`: the pool the scope spills over to (spill_target), if any."""
    tenant, model, region, cls = who
    t = keys.tag(p, pool.pool_id)  # every key of the scope and its pool under the pool's hash tag
    borrow = Bucket(keys.borrow(t, sp.key), sp.borrow_rate, sp.borrow_rate * depth_s) if sp.borrow_rate else None
    share = None
    lend = None if pool.lend_rate is None else Bucket(keys.lend(t), pool.lend_rate, pool.lend_rate * depth_s)
    # Where lenders limit lending, every own admission charges the lend bucket too (issue 36.3, base.Lends).
    keep = Bucket(keys.keep(t, sp.key), sp.keep_back, sp.rate * depth_s) if sp.keep_back > 0 else None
    lends = None if lend is None else Lends(lend, keep)
    if borrow is not None:  # lending limits and fair share (issue 36.3): what a borrowed admission also needs
        # A borrower stays active for twice RECLAIMED's retry advice after its last borrowed attempt,
        # so one that was refused keeps its share of the room until it retries.
        active_s = 2.0 * RETRY_DEFAULTS[reasons.RECLAIMED]
        share = Share(lend, keys.fair(t), sp.key, float(sp.weight), depth_s, active_s)
    scope = Scope(
        inflight_key=keys.inflight(t, sp.key), max_concurrency=sp.max_concurrency, traffic_class=sp.traffic_class,
        own=Bucket(keys.own(t, sp.key), sp.rate, sp.rate * depth_s), pool=Bucket(keys.pool(t), pool.rate, pool.depth),
        borrow=borrow, margin=pool.margin, degraded=pool.degraded, reserved_floor=pool.reserved_floor,
        ttl_s=ttl_s, idem_ttl_s=idem_ttl_s, w_out=sp.w_out, w_cached=sp.w_cached,
        max_output=sp.max_output_tokens, limits=budgets.limits_for(sp.limits, t, sp.key), tag=t, share=share,
        spill=_spill(sp, target, p, depth_s), lends=lends,
    )  # fmt: skip
    static_meta = {"tenant": tenant, "model": model, "region": region, "traffic_class": cls,
                   "ttft_slo": sp.ttft_p99_ms, "tpot_slo": sp.tpot_p99_ms, "entitlement": sp.entitlement}  # fmt: skip
    head = {"tenant": tenant, "model": model, "region": region, "traffic_class": cls, "entitlement": sp.entitlement}
    return Plan(sp, scope, json.dumps(static_meta, separators=(",", ":"))[1:], head, quota_names(scope))


# ---- reserve --------------------------------------------------------------------------------

# Throttles that no retry can pass (the request itself is outside what was bought): no advice to
# retry at all (docs/contract.md §4: retry_after_s null, no Retry-After header).
NEVER_PASSES = frozenset({reasons.OUTSIDE_ENVELOPE})


def throttle(reason: str, retry_after: int | None = None) -> Decision:
    r = reasons.REASONS[reason]
    ra: int | None = r.default_retry_after_s if retry_after is None else retry_after
    if reason in NEVER_PASSES:
        ra = None
    return Decision(429, {"decision": "throttle", "reason": reason, "responsible": r.responsible, "retry_after_s": ra})


def reserve_event(
    req: ReserveRequest, decision: str, est: float, head: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """An admit or throttle event; `head`: a matched scope's static fields (Plan.event_head)."""
    if head is None:
        head = {"tenant": req.tenant, "model": req.model, "region": req.region, "traffic_class": req.traffic_class}
    ev = {**head, "event_id": req.request_id, "ts": now_iso(), "decision": decision, "estimated_wt": est,
          "prompt_tokens": req.prompt_tokens, "cached_prompt_tokens": req.cached_prompt_tokens, **extra}  # fmt: skip
    if req.project:
        ev["project"] = req.project
    return ev


class Hooks:
    """What a mode adds around a decision (the web tier measures reclaim latency); no-ops here."""

    def admitted(self, backend: Any, sp: ScopeParams, source: str) -> None:
        return None

    def reclaimed(self, backend: Any, sp: ScopeParams) -> None:
        return None


NO_HOOKS = Hooks()


# The remaining-quota headers that do not change per request, and the names of those the store answers,
# in its order (backends/quota.quota_raw): built with the scope's plan, so a reserve only zips them together (a
# lookup per request by the scope's identity cost 2-3 µs of the ~5 the headers take after the round
# trip, where Python runs with cold caches: bench/quota_headers.py). QuotaNames: serving_types.py.
def quota_names(s: Scope) -> QuotaNames:
    lim = s.limits
    static = {"x-ratelimit-limit-tokens": str(math.floor(s.own.depth))}
    names = ["x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"]
    if lim is not None and lim.rps is not None and has_rps(s):
        static["x-ratelimit-limit-requests"] = str(math.floor(lim.rps.depth))
        names += ["x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"]
    names += [f"x-headroom-budget-remaining-{p.kind}" for p in lim.periods] if lim else []
    return static, tuple(names)


def quota_headers(n: QuotaNames, q: str) -> dict[str, str]:
    """The remaining quota as the headers LiteLLM and OpenAI clients read (docs/contract.md §5; meaning in
    capacity units in admission/README.md): whole weighted tokens left in the scope's own bucket and
    seconds until it is full again; requests left in the request-rate bucket where `max_rps` is set;
    what each period budget has left, in its unit, where budgets are set. A bucket in debt reads 0.
    `n`: the scope's quota_names; `q`: the store's answer (quota.quota_raw's form; its last field, the
    store's clock, has no name)."""
    h = n[0].copy()
    h.update(zip(n[1], q.split("|"), strict=False))
    return h


def reserve(
    req: ReserveRequest, snap: Snapshot, backend: Any, *, sign: Callable[[Claims], str], rid_key: bytes,
    plan_for: PlanFor, emit: Emit, hooks: Hooks = NO_HOOKS, epoch: str | None = None, quota: bool = True,
) -> Decision:  # fmt: skip
    """`epoch`: the token-revocation epoch the caller's token was verified under, checked by the
    store in the same call (EpochChanged: nothing decided, verify again); None: no check.
    `quota`: answer with the remaining-quota headers (Decision.headers; the store reads them in the
    same call, bench/quota_headers.py measures what they cost)."""
    if (req.model, req.region) not in snap.placements:
        emit(reserve_event(req, "throttle", 0.0, reason=reasons.PLACEMENT))
        return throttle(reasons.PLACEMENT)
    sp = snap.lookup(req.tenant, req.project, req.model, req.region, req.traffic_class)
    pool = snap.pools.get(sp.pool_id) if sp else None
    if sp is None or pool is None:
        emit(reserve_event(req, "throttle", 0.0, reason=reasons.NOT_ENTITLED))
        return throttle(reasons.NOT_ENTITLED)
    if req.prompt_tokens > sp.max_prompt_tokens or (req.max_output_tokens or 0) > sp.max_output_tokens:
        emit(reserve_event(req, "throttle", 0.0, reason=reasons.OUTSIDE_ENVELOPE, entitlement=sp.entitlement))
        return throttle(reasons.OUTSIDE_ENVELOPE)
    plan = plan_for(snap, sp, pool, backend.prefix, (req.tenant, req.model, req.region, req.traffic_class))
    out_est = req.max_output_tokens if req.max_output_tokens is not None else sp.output_p95
    cached = req.cached_prompt_tokens
    cost = (req.prompt_tokens - cached) + sp.w_cached * cached + sp.w_out * out_est
    # The meta JSON, with its static members from the plan (json.loads gives the same dict as before).
    meta = (f'{{"request_id":{_json_str(req.request_id)},"project":{_json_str(req.project)},"estimated_wt":{cost!r},'
            f'"prompt_tokens":{req.prompt_tokens},"cached_prompt_tokens":{cached},{plan.meta_tail}')  # fmt: skip
    rid = record_name(rid_key, req.tenant, req.request_id)
    spill = plan.scope.spill
    overflow = spill is not None and (req.overflow == "allow" or req.overflow is None and spill.allow)
    hold = None
    if snap.usd.limits:  # issue 51.3: a $ budget is held first (admission.usd); none: no extra call
        hold = usd.hold_for(snap.usd, backend.prefix, req.tenant, req.project, sp.pool_id, cost, rid,
                            backend.period_now(), plan.scope.ttl_s)  # fmt: skip
    try:
        if hold is not None:
            got = backend.usd_hold(hold)
            if not got.admitted:
                return _usd_refused(req, cost, plan, got.remaining, backend.period_now(), emit, quota)
        units = budgets.units_of(plan.scope.limits, cost, req.prompt_tokens, out_est)
        ans = backend.reserve(ReserveOp(plan.scope, rid, cost, meta, units, epoch, quota, overflow))
        for m in ans.expired_metas:
            emit_expired(m, emit)
        headers = quota_headers(plan.quota, ans.quota) if ans.quota is not None else {}
        if ans.handoff and spill is not None:
            # The own bucket is short and the request may spill (docs/spillover.md): the second call,
            # on the target pool's hash tag, decides it once (a retry is sent there again and replays).
            smeta = f'{meta[:-1]},"source_kind":"{SPILLOVER}","served_from":{_json_str(spill.slug)}}}'
            s = plan.scope
            ans = backend.spill(SpillOp(spill, rid + SPILLED, cost, smeta, "T|" + ans.raw[2:], s.ttl_s, s.idem_ttl_s,
                                        s.w_out, s.w_cached, s.max_output))  # fmt: skip
    except StoreUnavailable:
        return fail_mode(req, cost, sp, plan.scope.ttl_s, sign, emit)
    parts = ans.raw.split("|")
    if hold is not None:
        if parts[0] != "A" or ans.settled:  # refused, or a replay of one already settled: nothing to hold
            _usd_release(backend, hold)
        elif quota:
            headers = {**headers, USD_HEADER: usd.remaining_header(got.remaining)}
    if parts[0] == "A":
        source = parts[3]
        served = {"served_from": spill.slug} if source == SPILLOVER and spill is not None else {}
        if not ans.replay or ans.retried:  # a retried call may have admitted unseen: telemetry dedups by id
            emit(reserve_event(req, "admit", cost, plan.event_head, source_kind=source, in_flight=ans.in_flight,
                               **served))  # fmt: skip
            if not served:  # reclaim latency is about lenders and borrowers in the scope's own pool
                hooks.admitted(backend, sp, source)
        pool_id = spill.pool_id if served and spill is not None else sp.pool_id
        if served:  # said in a header too, for clients that read headers only (the gateways pass it on)
            headers = {**headers, "x-headroom-served-from": served["served_from"]}
        d = _admitted(req, sp, parts[2], source, parts[4], sign, plan.scope.ttl_s, settled=ans.settled,
                      pool_id=pool_id, headers=headers)  # fmt: skip
        if served:
            d.body.update(served)
        return d
    reason, ra = parts[1], parts[2]
    # Which limit a QUOTA_EXCEEDED hit: the token rate, or the request rate ("rps", docs/contract.md §5).
    # A borrower's may name the lenders' limit ("lending") or its fair share of borrowing ("fair_share").
    limit = (parts[3] if len(parts) > 3 else "rate") if reason == reasons.QUOTA_EXCEEDED else None
    if not ans.replay or ans.retried:
        extra = {"limit": limit} if limit else {}
        emit(reserve_event(req, "throttle", cost, plan.event_head, reason=reason, **extra))
        if reason == reasons.RECLAIMED:
            hooks.reclaimed(backend, sp)
    out = throttle(reason, int(ra))
    if limit:
        out.body["limit"] = limit
    zero = budgets.zero_budget(plan.scope.limits) if reason == reasons.BUDGET_EXHAUSTED else None
    if zero is not None:  # the period's end would be a retry time no retry can use
        out.body.update(
            retry_after_s=None, message=f"the {zero} budget is 0: every request is refused, no retry passes"
        )
    return Decision(out.status, out.body, headers)


USD_HEADER = "x-headroom-budget-remaining-usd"


def _usd_refused(
    req: ReserveRequest, cost: float, plan: Plan, left: float, now: float, emit: Emit, quota: bool
) -> Decision:
    """A $ budget would go over its month's limit (issue 51.3): BUDGET_EXHAUSTED, `limit: "usd"`,
    retry at the month's end (UTC), when the account starts again."""
    emit(reserve_event(req, "throttle", cost, plan.event_head, reason=reasons.BUDGET_EXHAUSTED, limit="usd"))
    out = throttle(reasons.BUDGET_EXHAUSTED, max(1, math.ceil(usd.month_end(now) - now)))
    out.body["limit"] = "usd"
    return Decision(out.status, out.body, {USD_HEADER: usd.remaining_header(left)} if quota else {})


def _usd_release(backend: Any, hold: usd.UsdHold) -> None:
    """Give back a hold whose reserve was refused; the store being away leaves it to expire (then it
    is charged at its estimate: a refused request may cost its estimate while the store is down)."""
    with contextlib.suppress(StoreUnavailable):
        backend.usd_settle(hold.keys, hold.rid, 0.0)


def _admitted(
    req: ReserveRequest, sp: ScopeParams, wt: str, source: str, expires: str, sign: Callable[[Claims], str],
    ttl_s: float, *, settled: bool = False, pool_id: int | None = None, headers: dict[str, str] | None = None,
) -> Decision:  # fmt: skip
    """The admit answer; its reservation id is signed and built from the stored answer only, so a
    replay gets the same id. `settled`: a replay of a reservation already completed or expired,
    which a gateway must not serve again (it is not counted again either)."""
    scope = (req.tenant, req.project, req.model, req.region, req.traffic_class)
    # A spilled reservation's id names the target pool (`pool_id`) and source "spillover": its complete
    # settles against the spill budget and the target's pool bucket (where()).
    token = sign(Claims(req.tenant, req.request_id, scope, sp.pool_id if pool_id is None else pool_id, wt, expires,
                        source))  # fmt: skip
    exp = float(expires) or time.time() + ttl_s  # "0": fail-open, expiring by the local clock
    body = {"decision": "admit", "reservation_id": token, "reserved_wt": float(wt), "source": source,
            "expires_at": iso_utc(exp)}  # fmt: skip
    if settled:
        body["settled"] = True
    return Decision(200, body, {} if headers is None else headers)


def fail_mode(
    req: ReserveRequest, cost: float, sp: ScopeParams, ttl_s: float, sign: Callable[[Claims], str], emit: Emit
) -> Decision:
    """Store down: guaranteed classes are admitted and recorded as such; best_effort is refused.
    A fail-open id is signed and derived from the request alone (expiry "0"): the same request
    gets the same id, and its complete finds everything it needs in it, in any process."""
    if req.traffic_class == BEST_EFFORT:
        emit(reserve_event(req, "throttle", cost, reason=reasons.ADMISSION_UNAVAILABLE, entitlement=sp.entitlement))
        return throttle(reasons.ADMISSION_UNAVAILABLE)
    emit(reserve_event(req, "admit", cost, source_kind="fail_open", entitlement=sp.entitlement))
    return _admitted(req, sp, repr(cost), "fail_open", "0", sign, ttl_s)
