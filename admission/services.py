"""Reserve and complete: the serving path (CONTRACT §5).

Parameters come from the in-process snapshot (admission.params), the atomic decision from the
backend (one Redis script or the in-process store), and every decision leaves an event in the
buffer (admission.events). Nothing here touches the database per request.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from hashlib import blake2b
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any

from django.core.exceptions import ValidationError

from admission import events, ids, params, plans, reclaims, sweeper
from admission.backends import get_backend
from admission.backends.base import BEST_EFFORT, CompleteOp, Lost, ReserveOp, StoreUnavailable
from admission.isotime import iso_utc, now_iso
from entitlements import reasons

CLASSES = ("reserved", "shared", "best_effort")
STATUSES = ("ok", "cancelled", "error")
DEFAULT_TTL_S, DEFAULT_IDEM_TTL_S = plans.DEFAULT_TTL_S, plans.DEFAULT_IDEM_TTL_S


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


# ---- input ----------------------------------------------------------------------------------


# Input ranges (README: admission). An identifier ends up in a Redis key, an event and a database
# row: control characters (a NUL breaks PostgreSQL text) are refused, and lengths stay within the
# event columns (tenant, project, model, region: 64). A request id's complete event is
# "<request_id>:complete" and event ids hold 160 characters: 128 leaves room, so no accepted id
# ever loses its event.
MAX_LEN = {"request_id": 128, "tenant": 64, "project": 64, "model": 64, "region": 64, "reservation_id": 1024}
MAX_TOKENS = 1_000_000_000  # per request; beyond any context window, within 64-bit sums
MAX_MS = 86_400_000.0  # a day


def _controls(v: str) -> bool:
    return any(c < " " or "\x7f" <= c <= "\x9f" for c in v)


def _str(d: dict[str, Any], name: str, *, required: bool = True) -> str:
    v = d.get(name)
    if v is None or v == "":
        if required:
            raise ValidationError({name: "this field is required"})
        return ""
    limit = MAX_LEN.get(name, 200)
    if not isinstance(v, str) or len(v) > limit:
        raise ValidationError({name: f"must be a string of at most {limit} characters"})
    if not v.isprintable() and _controls(v):
        raise ValidationError({name: "must not contain control characters"})
    return v


def _int(d: dict[str, Any], name: str, *, required: bool = True) -> int | None:
    v = d.get(name)
    if v is None:
        if required:
            raise ValidationError({name: "this field is required"})
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > MAX_TOKENS:
        raise ValidationError({name: f"must be a whole number from 0 to {MAX_TOKENS:,}"})
    return v


def _num(d: dict[str, Any], name: str) -> float | None:
    v = d.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= MAX_MS:
        raise ValidationError({name: f"must be a number from 0 to {MAX_MS:,.0f}"})
    return float(v)


def _cached(d: dict[str, Any], prompt: int) -> int:
    cached = _int(d, "cached_prompt_tokens", required=False) or 0
    if cached > prompt:
        raise ValidationError({"cached_prompt_tokens": "cannot exceed prompt_tokens"})
    return cached


def parse_reserve(d: Any) -> ReserveRequest:
    if not isinstance(d, dict):
        raise ValidationError({"non_field_errors": "expected a JSON object"})
    cls = _str(d, "traffic_class")
    if cls not in CLASSES:
        raise ValidationError({"traffic_class": f"must be one of {', '.join(CLASSES)}"})
    prompt = _int(d, "prompt_tokens") or 0
    return ReserveRequest(
        request_id=_str(d, "request_id"), tenant=_str(d, "tenant"), project=_str(d, "project", required=False),
        model=_str(d, "model"), region=_str(d, "region"), traffic_class=cls, prompt_tokens=prompt,
        cached_prompt_tokens=_cached(d, prompt), max_output_tokens=_int(d, "max_output_tokens", required=False),
    )  # fmt: skip


def parse_complete(d: Any) -> CompleteRequest:
    if not isinstance(d, dict):
        raise ValidationError({"non_field_errors": "expected a JSON object"})
    status = _str(d, "status")
    if status not in STATUSES:
        raise ValidationError({"status": f"must be one of {', '.join(STATUSES)}"})
    prompt = _int(d, "prompt_tokens") or 0
    return CompleteRequest(
        reservation_id=_str(d, "reservation_id"), prompt_tokens=prompt, cached_prompt_tokens=_cached(d, prompt),
        output_tokens=_int(d, "output_tokens") or 0, status=status, ttft_ms=_num(d, "ttft_ms"), e2e_ms=_num(d, "e2e_ms"),
    )  # fmt: skip


# ---- reserve --------------------------------------------------------------------------------


def reservation_id(rid_key: bytes, tenant: str, request_id: str) -> str:
    """The store's name for a request's record: a keyed hash of its identity (ids.record_key), so
    a retry of the same request lands on the same record (one record is both the reservation and
    its idempotency entry). Gateways see the signed id (admission.ids), which carries the identity."""
    return blake2b(f"{tenant}\n{request_id}".encode(), digest_size=16, key=rid_key).hexdigest()


# Throttles that no retry can pass (the request itself is outside what was bought): no advice to
# retry at all (CONTRACT §4: retry_after_s null, no Retry-After header).
NEVER_PASSES = frozenset({reasons.OUTSIDE_ENVELOPE})


def throttle(reason: str, retry_after: int | None = None) -> Decision:
    r = reasons.REASONS[reason]
    ra = r.default_retry_after_s if retry_after is None else retry_after
    if reason in NEVER_PASSES:
        ra = None
    return Decision(429, {"decision": "throttle", "reason": reason, "responsible": r.responsible, "retry_after_s": ra})


def _event(req: ReserveRequest, decision: str, est: float, head: dict[str, Any] | None = None, **extra: Any) -> dict:
    """An admit or throttle event; `head`: a matched scope's static fields (plans.Plan.event_head)."""
    if head is None:
        head = {"tenant": req.tenant, "model": req.model, "region": req.region, "traffic_class": req.traffic_class}
    ev = {**head, "event_id": req.request_id, "ts": now_iso(), "decision": decision, "estimated_wt": est,
          "prompt_tokens": req.prompt_tokens, "cached_prompt_tokens": req.cached_prompt_tokens, **extra}  # fmt: skip
    if req.project:
        ev["project"] = req.project
    return ev


def _refuse(
    req: ReserveRequest, reason: str, est: float = 0.0, retry_after: int | None = None, **extra: Any
) -> Decision:
    events.emit(_event(req, "throttle", est, reason=reason, **extra))
    return throttle(reason, retry_after)


def reserve(req: ReserveRequest) -> Decision:
    sweeper.ensure_started()
    snap = params.current()
    if (req.model, req.region) not in snap.placements:
        return _refuse(req, reasons.PLACEMENT)
    sp = snap.lookup(req.tenant, req.project, req.model, req.region, req.traffic_class)
    pool = snap.pools.get(sp.pool_id) if sp else None
    if sp is None or pool is None:
        return _refuse(req, reasons.NOT_ENTITLED)
    if req.prompt_tokens > sp.max_prompt_tokens or (req.max_output_tokens or 0) > sp.max_output_tokens:
        return _refuse(req, reasons.OUTSIDE_ENVELOPE, entitlement=sp.entitlement)
    backend = get_backend()
    plan = plans.plan_for(snap, sp, pool, backend.prefix, (req.tenant, req.model, req.region, req.traffic_class))
    out_est = req.max_output_tokens if req.max_output_tokens is not None else sp.output_p95
    cached = req.cached_prompt_tokens
    cost = (req.prompt_tokens - cached) + sp.w_cached * cached + sp.w_out * out_est
    # The meta JSON, with its static members from the plan (json.loads gives the same dict as before).
    meta = (f'{{"request_id":{_json_str(req.request_id)},"project":{_json_str(req.project)},"estimated_wt":{cost!r},'
            f'"prompt_tokens":{req.prompt_tokens},"cached_prompt_tokens":{cached},{plan.meta_tail}')  # fmt: skip
    rid = reservation_id(ids.record_key(), req.tenant, req.request_id)
    try:
        ans = backend.reserve(ReserveOp(plan.scope, rid, cost, meta))
    except StoreUnavailable:
        return _fail_mode(req, cost, json.loads(meta), sp)
    for m in ans.expired_metas:
        _emit_expired(m)
    parts = ans.raw.split("|")
    if parts[0] == "A":
        if not ans.replay or ans.retried:  # a retried call may have admitted unseen: telemetry dedups by id
            events.emit(_event(req, "admit", cost, plan.event_head, source_kind=parts[3]))
            _watch_reclaims(backend, sp, parts[3])
        return _admitted(req, sp, parts[2], parts[3], parts[4], settled=ans.settled)
    _, reason, ra = parts
    if not ans.replay or ans.retried:
        events.emit(_event(req, "throttle", cost, plan.event_head, reason=reason))
        if reason == reasons.RECLAIMED:
            reclaims.reclaimed(sp.pool_id, _now(backend))
    return throttle(reason, int(ra))


def _now(backend: Any) -> float:
    clock = getattr(backend, "clock", None)  # the in-process backend's clock (tests inject theirs)
    return clock() if clock is not None else time.time()


def _watch_reclaims(backend: Any, sp: Any, source: str) -> None:
    if source == "borrowed":
        reclaims.borrowed(sp.pool_id, _now(backend))
    elif sp.traffic_class != BEST_EFFORT:
        reclaims.lender_admitted(sp.pool_id, _now(backend))


def _admitted(req: ReserveRequest, sp: Any, wt: str, source: str, expires: str, *, settled: bool = False) -> Decision:
    """The admit answer; its reservation id is signed and built from the stored answer only, so a
    replay gets the same id. `settled`: a replay of a reservation already completed or expired,
    which a gateway must not serve again (it is not counted again either)."""
    scope = (req.tenant, req.project, req.model, req.region, req.traffic_class)
    token = ids.sign(ids.Claims(req.tenant, req.request_id, scope, sp.pool_id, wt, expires, source))
    exp = float(expires) or time.time() + plans.ttl_s()  # "0": fail-open, expiring by the local clock
    body = {"decision": "admit", "reservation_id": token, "reserved_wt": float(wt), "source": source,
            "expires_at": iso_utc(exp)}  # fmt: skip
    if settled:
        body["settled"] = True
    return Decision(200, body)


def _fail_mode(req: ReserveRequest, cost: float, meta: dict[str, Any], sp: Any) -> Decision:
    """Store down: guaranteed classes are admitted and recorded as such; best_effort is refused.
    A fail-open id is signed and derived from the request alone (expiry "0"): the same request
    gets the same id, and its complete finds everything it needs in it, in any process."""
    if req.traffic_class == BEST_EFFORT:
        return _refuse(req, reasons.ADMISSION_UNAVAILABLE, cost, entitlement=meta["entitlement"])
    events.emit(_event(req, "admit", cost, source_kind="fail_open", entitlement=meta["entitlement"]))
    return _admitted(req, sp, repr(cost), "fail_open", "0")


# ---- complete -------------------------------------------------------------------------------


def _slo_met(meta: dict[str, Any], req: CompleteRequest) -> bool | None:
    if req.ttft_ms is None:
        return None
    ok = req.ttft_ms <= meta.get("ttft_slo", float("inf"))
    if req.e2e_ms is not None and req.output_tokens > 1:
        ok = ok and (req.e2e_ms - req.ttft_ms) / (req.output_tokens - 1) <= meta.get("tpot_slo", float("inf"))
    return ok


def _complete_event(
    meta: dict[str, Any], status: str, actual_wt: float, req: CompleteRequest | None, output_cap: int | None = None
) -> dict[str, Any]:
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
    if req is not None:
        ev.update(output_tokens=req.output_tokens, ttft_ms=req.ttft_ms, e2e_ms=req.e2e_ms, slo_met=_slo_met(meta, req))
        if output_cap is not None and req.output_tokens > output_cap:
            # Charged at the envelope's max output; what the gateway reported is kept beside it.
            ev.update(output_tokens=output_cap, output_capped=True, reported_output_tokens=req.output_tokens)
    return ev


def _emit_expired(meta_json: str) -> None:
    meta = json.loads(meta_json)
    events.emit(_complete_event(meta, "expired", meta["estimated_wt"], None))


def _claims_meta(c: ids.Claims, sp: Any, estimate: float, req: CompleteRequest) -> dict[str, Any]:
    """The meta a reservation's store record would hold, rebuilt from its signed id and the snapshot
    (the prompt as the complete reports it: the id does not carry it)."""
    _, project, model, region, cls = c.scope
    meta = {"request_id": c.request_id, "project": project, "estimated_wt": estimate, "tenant": c.tenant,
            "model": model, "region": region, "traffic_class": cls, "entitlement": sp.entitlement if sp else None,
            "prompt_tokens": req.prompt_tokens, "cached_prompt_tokens": req.cached_prompt_tokens}  # fmt: skip
    if sp is not None:
        meta.update(ttft_slo=sp.ttft_p99_ms, tpot_slo=sp.tpot_p99_ms)
    if c.fail_open:
        meta["source_kind"] = "fail_open"
    return meta


def _charged(req: CompleteRequest, sp: Any) -> tuple[float, int | None]:
    """(actual wt, the output cap if it applied), as the store would settle it."""
    if sp is None:
        return float(req.prompt_tokens - req.cached_prompt_tokens + req.output_tokens), None
    out = min(req.output_tokens, sp.max_output_tokens)
    cached = req.cached_prompt_tokens
    actual = (req.prompt_tokens - cached) + sp.w_cached * cached + sp.w_out * out
    return actual, (sp.max_output_tokens if out < req.output_tokens else None)


def _lost(claims: ids.Claims, key: str, snap: Any, sp: Any, prefix: str) -> Lost | None:
    """What the signed id says, for a store that forgot the reservation (None: no longer entitled)."""
    pool = snap.pools.get(claims.pool_id)
    if sp is None or pool is None:
        return None
    _, _, model, region, cls = claims.scope
    s = plans.plan_for(snap, sp, pool, prefix, (claims.tenant, model, region, cls)).scope
    charged = s.borrow if claims.source == "borrowed" and s.borrow is not None else s.own
    answer = f"A|{key}|{claims.estimate}|{claims.source}|{claims.expires}"
    return Lost(charged, s.pool, sp.w_out, sp.w_cached, sp.max_output_tokens, float(claims.estimate),
                float(claims.expires), answer)  # fmt: skip


def complete(req: CompleteRequest) -> tuple[int, dict[str, Any]]:
    claims = ids.verify(req.reservation_id)
    if claims is None:
        return 404, {"error": {"code": "not_found", "message": "no such reservation (not an id this platform signed)"}}
    snap = params.current()
    sp = snap.lookup(*claims.scope)
    backend = get_backend()
    key = reservation_id(ids.record_key(), claims.tenant, claims.request_id)
    estimate = float(claims.estimate)
    op = CompleteOp(
        reservation_id=key, prompt_tokens=req.prompt_tokens, cached_prompt_tokens=req.cached_prompt_tokens,
        output_tokens=req.output_tokens, status=req.status, idem_ttl_s=plans.idem_ttl_s(),
        lost=_lost(claims, key, snap, sp, backend.prefix),
    )  # fmt: skip
    try:
        settled = backend.complete(op)
    except StoreUnavailable:
        # The event is recorded now (a retry, or the reservation's expiry, repeats its event id, which
        # telemetry keeps once); the settlement itself waits for the store.
        actual, cap = _charged(req, sp)
        events.emit(_complete_event(_claims_meta(claims, sp, estimate, req), req.status, actual, req, cap))
        if claims.fail_open:
            return 200, {"reservation_id": req.reservation_id, "status": req.status, "source": "fail_open"}
        r = reasons.REASONS[reasons.ADMISSION_UNAVAILABLE]
        return 503, {"error": {"code": reasons.ADMISSION_UNAVAILABLE, "message": r.when}}
    if settled is None:
        return 404, {"error": {"code": "not_found", "message": "no such reservation (unknown, or settled long ago)"}}
    result = {**settled.result, "reservation_id": req.reservation_id}
    status = result["status"]
    meta = None
    if settled.meta and (not settled.replay or settled.retried):
        meta = json.loads(settled.meta)
    elif settled.lost or (settled.replay and settled.retried):
        meta = _claims_meta(claims, sp, estimate, req)  # the store forgot it, or its first answer was lost
    if meta is not None:
        events.emit(_complete_event(meta, status, result["actual_wt"], None if status == "expired" else req,
                                    result.get("output_cap")))  # fmt: skip
    if claims.fail_open:
        result["source"] = "fail_open"
    return 200, result


def sweep(limit: int = 1000) -> int:
    """Settle reservations past their TTL at their full estimate (Celery beat + lazily on access)."""
    total = 0
    while True:
        metas = get_backend().sweep(limit)
        for m in metas:
            _emit_expired(m)
        total += len(metas)
        if len(metas) < limit:
            return total


# ---- operator: pool health, reclaim measurements ---------------------------------------------


def set_pool_health(*, pool: Any, replicas_healthy: int, replicas_total: int, actor: Any) -> Any:
    from admission.models import PoolHealthOverride

    if replicas_total <= 0:
        raise ValidationError({"replicas_total": "must be greater than 0"})
    if replicas_healthy > replicas_total:
        raise ValidationError({"replicas_healthy": "cannot exceed replicas_total"})
    row, _ = PoolHealthOverride.objects.update_or_create(
        pool=pool,
        defaults={"replicas_healthy": replicas_healthy, "replicas_total": replicas_total, "set_by": actor},
    )
    params.invalidate()
    return row


def clear_pool_health(*, pool: Any) -> None:
    from admission.models import PoolHealthOverride

    PoolHealthOverride.objects.filter(pool=pool).delete()
    params.invalidate()


def record_reclaim(*, pool_id: int, latency_ms: float, borrowers_cut: int, at: datetime | None = None) -> Any:
    from django.utils import timezone

    from admission.models import ReclaimEvent

    return ReclaimEvent.objects.create(
        pool_id=pool_id, at=at or timezone.now(), latency_ms=latency_ms, borrowers_cut=borrowers_cut
    )
