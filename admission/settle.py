"""The serving path's complete and sweep without Django: a reservation settled at what it used,
its complete event, and what a store that forgot it settles from the signed id (see core.py's
docstring: both modes call these with the same arguments).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any

from admission import keys, usd
from admission.backends.base import SPILLED, CompleteOp, Lost, StoreUnavailable, Where
from admission.idcodec import Claims, record_name
from admission.isotime import now_iso
from admission.serving_types import SPILLOVER, CompleteRequest, Emit, PlanFor
from admission.snapshot_types import ScopeParams, Snapshot
from entitlements import reasons


def slo_met(meta: dict[str, Any], req: CompleteRequest) -> bool | None:
    if req.ttft_ms is None:
        return None
    ok = req.ttft_ms <= meta.get("ttft_slo", float("inf"))
    if req.e2e_ms is not None and req.output_tokens > 1:
        ok = ok and (req.e2e_ms - req.ttft_ms) / (req.output_tokens - 1) <= meta.get("tpot_slo", float("inf"))
    return ok


def complete_event(
    meta: dict[str, Any], status: str, actual_wt: float, req: CompleteRequest | None, output_cap: int | None = None,
    reported_prompt: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """`reported_prompt`: what the gateway reported when `req` carries the envelope's cap instead."""
    ev = {
        "event_id": f"{meta['request_id']}:complete", "ts": now_iso(), "tenant": meta["tenant"],
        "model": meta["model"], "region": meta["region"], "traffic_class": meta["traffic_class"],
        "decision": "complete", "status": status, "estimated_wt": meta["estimated_wt"], "actual_wt": actual_wt,
        "prompt_tokens": req.prompt_tokens if req else meta["prompt_tokens"],
        "cached_prompt_tokens": req.cached_prompt_tokens if req else meta["cached_prompt_tokens"],
        "entitlement": meta.get("entitlement"),
    }  # fmt: skip
    if meta.get("project"):
        ev["project"] = meta["project"]
    if meta.get("source_kind"):
        ev["source_kind"] = meta["source_kind"]
    if meta.get("served_from"):
        ev["served_from"] = meta["served_from"]
    if req is not None:
        ev.update(output_tokens=req.output_tokens, ttft_ms=req.ttft_ms, e2e_ms=req.e2e_ms, slo_met=slo_met(meta, req))
        if output_cap is not None and req.output_tokens > output_cap:
            # Charged at the envelope's max output; what the gateway reported is kept beside it.
            ev.update(output_tokens=output_cap, output_capped=True, reported_output_tokens=req.output_tokens)
        if reported_prompt is not None:
            ev.update(prompt_capped=True, reported_prompt_tokens=reported_prompt)
    return ev


def emit_expired(meta_json: str, emit: Emit) -> None:
    meta = json.loads(meta_json)
    emit(complete_event(meta, "expired", meta["estimated_wt"], None))


def claims_meta(c: Claims, sp: ScopeParams | None, estimate: float, req: CompleteRequest) -> dict[str, Any]:
    """The meta a reservation's store record would hold, rebuilt from its signed id and the snapshot
    (the prompt as the complete reports it: the id does not carry it)."""
    _, project, model, region, cls = c.scope
    meta = {"request_id": c.request_id, "project": project, "estimated_wt": estimate, "tenant": c.tenant,
            "model": model, "region": region, "traffic_class": cls, "entitlement": sp.entitlement if sp else None,
            "prompt_tokens": req.prompt_tokens, "cached_prompt_tokens": req.cached_prompt_tokens}  # fmt: skip
    if sp is not None:
        meta.update(ttft_slo=sp.ttft_p99_ms, tpot_slo=sp.tpot_p99_ms)
    if c.fail_open or c.source in (SPILLOVER, "borrowed"):
        meta["source_kind"] = c.source
    return meta


def capped_prompt(req: CompleteRequest, sp: ScopeParams | None) -> tuple[CompleteRequest, int | None]:
    """The complete as settled: its prompt capped at the envelope's max prompt (as output is), so
    one report of 10^9 prompt tokens cannot drive the pool's bucket into debt and throttle another
    tenant (issue 29). → (request, the prompt the gateway reported when capped, else None). A
    scope no longer in the snapshot has no envelope: its report stands (the debt stays bounded)."""
    if sp is None or req.prompt_tokens <= sp.max_prompt_tokens:
        return req, None
    cap = sp.max_prompt_tokens
    return dataclasses.replace(
        req, prompt_tokens=cap, cached_prompt_tokens=min(req.cached_prompt_tokens, cap)
    ), req.prompt_tokens


def charged(req: CompleteRequest, sp: ScopeParams | None) -> tuple[float, int | None]:
    """(actual wt, the output cap if it applied), as the store would settle it."""
    if sp is None:
        return float(req.prompt_tokens - req.cached_prompt_tokens + req.output_tokens), None
    out = min(req.output_tokens, sp.max_output_tokens)
    cached = req.cached_prompt_tokens
    actual = (req.prompt_tokens - cached) + sp.w_cached * cached + sp.w_out * out
    return actual, (sp.max_output_tokens if out < req.output_tokens else None)


def lost(
    claims: Claims, key: str, snap: Snapshot, sp: ScopeParams | None, prefix: str, plan_for: PlanFor
) -> Lost | None:
    """What the signed id says, for a store that forgot the reservation (None: no longer entitled)."""
    pool = snap.pools.get(claims.pool_id)
    if sp is None or pool is None:
        return None
    _, _, model, region, cls = claims.scope
    home = snap.pools.get(sp.pool_id) if claims.source == SPILLOVER else pool
    if home is None:
        return None
    s = plan_for(snap, sp, home, prefix, (claims.tenant, model, region, cls)).scope
    answer = f"A|{key}|{claims.estimate}|{claims.source}|{claims.expires}"
    expires = float(claims.expires)
    if claims.source == SPILLOVER:  # spilled: the spill budget and the target pool paid (no period budgets)
        if s.spill is None or s.spill.pool_id != claims.pool_id:
            return None  # the scope spills elsewhere now: the buckets that paid are not known any more
        return Lost(s.spill.bucket, s.spill.pool, sp.w_out, sp.w_cached, sp.max_output_tokens,
                    float(claims.estimate), expires, answer, None, expires - s.ttl_s if expires else 0.0)  # fmt: skip
    paid = s.borrow if claims.source == "borrowed" and s.borrow is not None else s.own
    return Lost(paid, s.pool, sp.w_out, sp.w_cached, sp.max_output_tokens, float(claims.estimate),
                expires, answer, s.limits, expires - s.ttl_s if expires else 0.0)  # fmt: skip


def where(claims: Claims, snap: Snapshot, sp: ScopeParams | None, prefix: str, plan_for: PlanFor) -> Where:
    """Every key the reservation's complete may touch, from its signed id: the pool it was charged
    to and its scope name them (as build_plan does); the period budgets come from the scope's plan
    while it is still entitled (else they are not refunded)."""
    t = keys.tag(prefix, claims.pool_id)
    # The scope the request matched (a project's request may match its tenant-wide scope); should
    # that have changed since, the store answers with the record's own keys and is asked again.
    skey = sp.key if sp is not None else ":".join(claims.scope)
    pool = snap.pools.get(claims.pool_id)
    # Issue 36.3: the lend accounts the reservation may have charged, where the pool's lenders limit lending.
    lending: tuple[str, ...] = ()
    if pool is not None and pool.lend_rate is not None:
        lending = (keys.lend(t), keys.fair(t), keys.keep(t, skey))
    if claims.source == SPILLOVER:  # `t` is the target pool's tag: the spill budget and the target pool paid
        return Where(t, keys.spill_inflight(t, skey), keys.spill(t, skey), keys.pool(t), None, lending[:1])
    charged = keys.borrow(t, skey) if claims.source == "borrowed" else keys.own(t, skey)
    limits = None
    if sp is not None and sp.limits is not None and pool is not None:
        _, _, model, region, cls = claims.scope
        limits = plan_for(snap, sp, pool, prefix, (claims.tenant, model, region, cls)).scope.limits
    if claims.source == "borrowed" and pool is not None and pool.lend_rate is None:
        lending = (keys.fair(t),)  # fair share without a lend bucket
    return Where(t, keys.inflight(t, skey), charged, keys.pool(t), limits, lending)


NOT_SIGNED = {"error": {"code": "not_found", "message": "no such reservation (not an id this platform signed)"}}
UNKNOWN = {"error": {"code": "not_found", "message": "no such reservation (unknown, or settled long ago)"}}


def complete(
    req: CompleteRequest, claims: Claims | None, snap: Snapshot, backend: Any, *, rid_key: bytes, plan_for: PlanFor,
    emit: Emit, idem_ttl_s: int, epoch: str | None = None,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    """`claims`: the verified reservation id (None: not one this platform signed); `epoch`: as reserve's."""
    if claims is None:
        return 404, NOT_SIGNED
    sp = snap.lookup(*claims.scope)
    req, reported_prompt = capped_prompt(req, sp)
    key = record_name(rid_key, claims.tenant, claims.request_id)
    if claims.source == SPILLOVER:
        key += SPILLED  # the spilled reservation's record, under the target pool's tag
    estimate = float(claims.estimate)
    op = CompleteOp(
        reservation_id=key, prompt_tokens=req.prompt_tokens, cached_prompt_tokens=req.cached_prompt_tokens,
        output_tokens=req.output_tokens, status=req.status, idem_ttl_s=idem_ttl_s,
        lost=lost(claims, key, snap, sp, backend.prefix, plan_for), where=where(claims, snap, sp, backend.prefix, plan_for),
        epoch=epoch,
    )  # fmt: skip
    try:
        settled = backend.complete(op)
    except StoreUnavailable:
        # The event is recorded now (a retry, or the reservation's expiry, repeats its event id, which
        # telemetry keeps once); the settlement itself waits for the store.
        actual, cap = charged(req, sp)
        emit(complete_event(claims_meta(claims, sp, estimate, req), req.status, actual, req, cap, reported_prompt))
        if claims.fail_open:
            return 200, {"reservation_id": req.reservation_id, "status": req.status, "source": "fail_open"}
        r = reasons.REASONS[reasons.ADMISSION_UNAVAILABLE]
        return 503, {"error": {"code": reasons.ADMISSION_UNAVAILABLE, "message": r.when}}
    if settled is not None and snap.usd.limits:
        _usd_settle(claims, snap, backend, rid_key, settled.result)
    if settled is None:
        # Signed by us, yet the store has no record to settle and no scope to settle it against (a
        # restart without data after the entitlement went): a complete always produces its event
        # (the same event id as any earlier one, which telemetry keeps once).
        actual, cap = charged(req, sp)
        emit(complete_event(claims_meta(claims, sp, estimate, req), req.status, actual, req, cap, reported_prompt))
        return 404, UNKNOWN
    result = {**settled.result, "reservation_id": req.reservation_id}
    status = result["status"]
    meta = None
    if settled.meta and (not settled.replay or settled.retried):
        meta = json.loads(settled.meta)
    elif settled.lost or (settled.replay and settled.retried):
        meta = claims_meta(claims, sp, estimate, req)  # the store forgot it, or its first answer was lost
    if meta is not None:
        emit(complete_event(meta, status, result["actual_wt"], None if status == "expired" else req,
                            result.get("output_cap"), None if status == "expired" else reported_prompt))  # fmt: skip
    if reported_prompt is not None and status != "expired":
        result["prompt_cap"] = req.prompt_tokens  # charged at the envelope's max prompt, as output_cap
    if claims.fail_open:
        result["source"] = "fail_open"
    return 200, result


def _usd_settle(claims: Claims, snap: Snapshot, backend: Any, rid_key: bytes, result: dict[str, Any]) -> None:
    """Charge the reservation's $ hold (issue 51.3) at its actual weighted tokens × the price of the
    pool that served it; an expired one at its estimate. No hold (none made, or settled already): nothing."""
    tenant, project = claims.tenant, claims.scope[1]
    now = backend.period_now()
    ks = usd.settle_keys(snap.usd, backend.prefix, tenant, project, now)
    if not ks:
        return
    charge = None if result["status"] == "expired" else result["actual_wt"] * snap.usd.per_wt.get(claims.pool_id, 0.0)
    with contextlib.suppress(StoreUnavailable):  # the hold stays: charged at its estimate when it expires
        backend.usd_settle(ks, record_name(rid_key, tenant, claims.request_id), charge)


def sweep(backend: Any, emit: Emit, limit: int = 1000) -> int:
    """Settle reservations past their TTL at their full estimate."""
    total = 0
    while True:
        metas = backend.sweep(limit)
        for m in metas:
            emit_expired(m, emit)
        total += len(metas)
        if len(metas) < limit:
            return total
