"""An entitlement's default concurrency cap from its pool and envelope (issue 15.5); the maths is
capacity.concurrency. The demo loader grants with it, and the entitlement API and page show the
derivation beside the stored cap, which an operator may override (entitlement_amend, with a reason,
recorded in the entitlement's history)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from capacity.concurrency import ConcurrencyCap, concurrency_cap
from capacity.envelope import envelope_shape
from capacity.sizing import kv_capacity_tokens
from entitlements.models import Pool
from entitlements.sizing_specs import accelerator_spec, model_spec

# Without a measured or limited latency (a throughput ceiling), the contract's interactive defaults.
FALLBACK_TTFT_MS, FALLBACK_TPOT_MS = 2000.0, 200.0


def burst_factor() -> float:
    return settings.CONCURRENCY_BURST_FACTOR


def _latencies(op: Any) -> tuple[float, float, str]:
    if op.measured_ttft_p99_ms is not None and op.measured_tpot_p99_ms is not None:
        return op.measured_ttft_p99_ms, op.measured_tpot_p99_ms, "measured p99s: an upper bound on the mean"
    if op.ttft_p99_limit_ms is not None and op.tpot_p99_limit_ms is not None:
        return op.ttft_p99_limit_ms, op.tpot_p99_limit_ms, "the point's p99 limits: an upper bound on the mean"
    return FALLBACK_TTFT_MS, FALLBACK_TPOT_MS, "no latency on the point (a ceiling): 2 s TTFT and 200 ms TPOT assumed"


def derive_max_concurrency(*, pool: Pool, cu: float, envelope: Any) -> ConcurrencyCap:
    """`envelope` has the Envelope fields (an Envelope, an Entitlement or a launch request)."""
    op, model, acc = pool.operating_point, pool.model, pool.accelerator
    shape = envelope_shape(
        prompt_p50=envelope.prompt_p50,
        prompt_p95=envelope.prompt_p95,
        max_prompt=envelope.max_prompt_tokens,
        output_p50=envelope.output_p50,
        output_p95=envelope.output_p95,
        max_output=envelope.max_output_tokens,
    )
    ttft_ms, tpot_ms, source = _latencies(op)
    kv_per_replica = kv_capacity_tokens(
        model_spec(model),
        accelerator_spec(acc),
        int(op.accelerators_per_replica),
        int(op.instances_per_replica),
    )
    replicas = pool.replicas
    return concurrency_cap(
        cu=float(cu),
        r_wt_per_s=float(model.r_wt_per_s),
        w_out=float(model.w_out),
        prompt_mean=shape.prompt.mean,
        output_mean=shape.output.mean,
        ttft_s=ttft_ms / 1000.0,
        tpot_s=tpot_ms / 1000.0,
        latency_source=source,
        burst_factor=burst_factor(),
        pool_cu=max(replicas, 1) * pool.cu_per_replica,
        replicas=max(replicas, 1),
        kv_tokens_per_replica=kv_per_replica,
    )


def max_concurrency_derivation(entitlement: Any, pools: dict[int, Pool] | None = None) -> dict[str, object] | None:
    """The derivation for the API and page: the derived cap, the stored one, and whether an operator
    overrode it. None where the pool cannot be derived from (no replicas or weights that do not fit).
    `pools` caches each pool with what the derivation reads, so a list costs one query per pool."""
    cache = pools if pools is not None else {}
    pool = cache.get(entitlement.pool_id)
    if pool is None:
        pool = (
            Pool.objects.select_related("model", "accelerator", "operating_point")
            .prefetch_related("zones")
            .get(pk=entitlement.pool_id)
        )
        cache[entitlement.pool_id] = pool
    try:
        cap = derive_max_concurrency(pool=pool, cu=float(entitlement.cu), envelope=entitlement)
    except ValueError:
        return None
    stored = int(entitlement.max_concurrency)
    return {**cap.to_dict(), "derived": cap.value, "stored": stored, "overridden": stored != cap.value}
