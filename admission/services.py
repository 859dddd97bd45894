"""Reserve and complete: the serving path (docs/contract.md §5).

Parameters come from the in-process snapshot (admission.params), the atomic decision from the
backend (one Redis script or the in-process store), and every decision leaves an event in the
buffer (admission.events). Nothing here touches the database per request.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.exceptions import ValidationError

from admission import core, events, ids, params, plans, reclaims, settle, sweeper
from admission.backends import get_backend
from admission.backends.base import BEST_EFFORT
from admission.core import NEVER_PASSES, throttle
from admission.idcodec import record_name
from admission.serving_types import OVERFLOWS, CompleteRequest, Decision, ReserveRequest
from http_plumbing.api_guards import SURROGATE_MESSAGE

__all__ = ["NEVER_PASSES", "CompleteRequest", "Decision", "ReserveRequest", "throttle"]

CLASSES = ("reserved", "shared", "best_effort")
STATUSES = ("ok", "cancelled", "error")


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


def _surrogates(v: str) -> bool:
    # valid JSON ("\ud800"), but no UTF-8 for it: the Redis key, the id's signature and the event's COPY all fail
    return any("\ud800" <= c <= "\udfff" for c in v)


def _str(d: dict[str, Any], name: str, *, required: bool = True) -> str:
    v = d.get(name)
    if v is None or v == "":
        if required:
            raise ValidationError({name: "this field is required"})
        return ""
    limit = MAX_LEN.get(name, 200)
    if not isinstance(v, str) or len(v) > limit:
        raise ValidationError({name: f"must be a string of at most {limit} characters"})
    if not v.isprintable():
        if _controls(v):
            raise ValidationError({name: "must not contain control characters"})
        if _surrogates(v):
            raise ValidationError({name: SURROGATE_MESSAGE})
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


def _object(d: Any) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise ValidationError({"non_field_errors": "expected a JSON object"})
    return d


def _choice(d: dict[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    v = _str(d, name)
    if v not in allowed:
        raise ValidationError({name: f"must be one of {', '.join(allowed)}"})
    return v


def parse_reserve(d: Any) -> ReserveRequest:
    d = _object(d)
    cls = _choice(d, "traffic_class", CLASSES)
    prompt = _int(d, "prompt_tokens") or 0
    return ReserveRequest(
        request_id=_str(d, "request_id"), tenant=_str(d, "tenant"), project=_str(d, "project", required=False),
        model=_str(d, "model"), region=_str(d, "region"), traffic_class=cls, prompt_tokens=prompt,
        cached_prompt_tokens=_cached(d, prompt), max_output_tokens=_int(d, "max_output_tokens", required=False),
        overflow=_overflow(d.get("overflow")),
    )  # fmt: skip


def _overflow(v: Any) -> str | None:
    """A reserve's `overflow` (issue 36.1): "allow" | "deny", absent or null: the entitlement's default."""
    if v is None or v in OVERFLOWS:
        return v
    raise ValidationError({"overflow": f"must be one of {', '.join(OVERFLOWS)}"})


def parse_complete(d: Any) -> CompleteRequest:
    d = _object(d)
    status = _choice(d, "status", STATUSES)
    prompt = _int(d, "prompt_tokens") or 0
    return CompleteRequest(
        reservation_id=_str(d, "reservation_id"), prompt_tokens=prompt, cached_prompt_tokens=_cached(d, prompt),
        output_tokens=_int(d, "output_tokens") or 0, status=status, ttft_ms=_num(d, "ttft_ms"), e2e_ms=_num(d, "e2e_ms"),
    )  # fmt: skip


# ---- reserve --------------------------------------------------------------------------------


def reservation_id(rid_key: bytes, tenant: str, request_id: str) -> str:
    """The store's name for a request's record (admission.idcodec.record_name)."""
    return record_name(rid_key, tenant, request_id)


class _WebHooks(core.Hooks):
    """The web tier measures reclaim latency per pool (admission.reclaims)."""

    def admitted(self, backend: Any, sp: Any, source: str) -> None:
        if source == "borrowed":
            reclaims.borrowed(sp.pool_id, _now(backend))
        elif sp.traffic_class != BEST_EFFORT:
            reclaims.lender_admitted(sp.pool_id, _now(backend))

    def reclaimed(self, backend: Any, sp: Any) -> None:
        reclaims.reclaimed(sp.pool_id, _now(backend))


_HOOKS = _WebHooks()


def reserve(req: ReserveRequest, epoch: str | None = None) -> Decision:
    """`epoch`: the token-revocation epoch the gateway's token was verified under (admission.auth)."""
    sweeper.ensure_started()
    return core.reserve(req, params.current(), get_backend(), sign=ids.sign, rid_key=ids.record_key(),
                        plan_for=plans.plan_for, emit=events.emit, hooks=_HOOKS, epoch=epoch)  # fmt: skip


def _now(backend: Any) -> float:
    clock = getattr(backend, "clock", None)  # the in-process backend's clock (tests inject theirs)
    return clock() if clock is not None else time.time()


def _fail_mode(req: ReserveRequest, cost: float, meta: dict[str, Any], sp: Any) -> Decision:
    """Store down (core.fail_mode): guaranteed classes admitted with a signed fail-open id, best_effort refused."""
    return core.fail_mode(req, cost, sp, plans.ttl_s(), ids.sign, events.emit)


def complete(req: CompleteRequest, epoch: str | None = None) -> tuple[int, dict[str, Any]]:
    return settle.complete(req, ids.verify(req.reservation_id), params.current(), get_backend(), rid_key=ids.record_key(),
                         plan_for=plans.plan_for, emit=events.emit, idem_ttl_s=plans.idem_ttl_s(), epoch=epoch)  # fmt: skip


# Settle reservations past their TTL (Celery beat, the in-process sweeper): admission.sweeper.sweep.
sweep = sweeper.sweep


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
