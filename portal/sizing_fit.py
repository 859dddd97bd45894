"""A launch request's sizing: how much capacity it asks for, and whether a pool can carry it.

Not a write (so not in services/): pure reads of the request and the catalogue.

Conversion, in one place: intake, review, approval and sizing all use `launch_shape`
(capacity.envelope: capped lognormals through the envelope's p50 and p95, their means for rates),
so the launch form and the sizing calculator cannot disagree on a class's CU.

wt/s = rps × (mean prompt + w_out × mean output)   (prompt uncached), or wt/min ÷ 60; CU = wt/s ÷ R.

Pool fit (committed_fit): the CU arithmetic says how much; this says whether the pool's operating
point meets the request's latency SLO at all, how many replicas its failure policy needs, and
whether the KV tail fits in memory, from the same envelope lengths the CU uses (launch_shape);
capacity.sizing answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from capacity.envelope import ENVELOPE_LENGTHS, EnvelopeShape, envelope_shape, rps_to_cu
from capacity.input_errors import SizingInputError
from capacity.operating_points import Slo
from capacity.sizing import SizingInput, size
from capacity.units import TokenWeights, wt_per_s_to_cu
from entitlements.models import Pool
from entitlements.sizing_specs import accelerator_spec, model_spec, point_spec

RPS = "rps"
WT_PER_MIN = "wt_per_min"


def launch_shape(req: Any) -> EnvelopeShape | None:
    """The envelope's length distributions; None until both p50s are filled in. A missing p95 is
    taken as the p50 (no spread stated), a missing max as no cap."""
    if req.prompt_p50 is None or req.output_p50 is None or req.prompt_p50 <= 0 or req.output_p50 <= 0:
        return None

    def p95(p50: float, value: float | None) -> float:
        return max(float(value), p50) if value is not None else p50

    p_p95 = p95(req.prompt_p50, req.prompt_p95)
    o_p95 = p95(req.output_p50, req.output_p95)
    return envelope_shape(
        prompt_p50=req.prompt_p50,
        prompt_p95=p_p95,
        max_prompt=req.max_prompt_tokens if req.max_prompt_tokens is not None else math.inf,
        output_p50=req.output_p50,
        output_p95=o_p95,
        max_output=req.max_output_tokens if req.max_output_tokens is not None else math.inf,
    )


def scenario_cu(
    *, basis: str, value: float, shape: EnvelopeShape | None, w_out: float, w_cached: float, r_wt_per_s: float
) -> float:
    if value < 0:
        raise ValueError("a scenario rate cannot be negative")
    if basis == RPS:
        if shape is None:
            raise ValueError("a request rate needs the envelope's p50 lengths")
        return rps_to_cu(value, shape, TokenWeights(w_out, w_cached), r_wt_per_s)
    if basis == WT_PER_MIN:
        return wt_per_s_to_cu(value / 60.0, r_wt_per_s)
    raise ValueError(f"unknown scenario basis '{basis}'")


def replicas_for(cu: float, cu_per_replica: float) -> int:
    """Whole replicas that carry `cu`; a tiny epsilon keeps 140.0000001 / 70 from becoming 3."""
    if cu <= 0:
        return 0
    return math.ceil(cu / cu_per_replica - 1e-9)


@dataclass(frozen=True)
class PoolFit:
    steady: int | None = None
    with_failure: int | None = None
    kv_fits: bool | None = None
    failure_policy: str = ""
    error: str = ""
    # Set when no measured point meets the latency target: the nearest target this pool does meet.
    nearest_ttft_ms: float | None = None
    nearest_tpot_ms: float | None = None
    target_ttft_ms: float | None = None
    target_tpot_ms: float | None = None


def _nearest_feasible(pool: Pool, req: Any) -> tuple[float | None, float | None]:
    """The loosest of (the request's target, the pool's measured p99) per term: the nearest target
    its operating point was measured to meet."""
    op = pool.operating_point
    ttft = op.measured_ttft_p99_ms or op.ttft_p99_limit_ms
    tpot = op.measured_tpot_p99_ms or op.tpot_p99_limit_ms
    return (
        max(float(req.ttft_p99_ms), float(ttft)) if ttft else None,
        max(float(req.tpot_p99_ms), float(tpot)) if tpot else None,
    )


def pool_sizing_input(pool: Pool, rps: float, req: Any, shape: EnvelopeShape) -> SizingInput:
    """The committed load on the pool's own operating point (also sized for its latency, docs/latency.md)."""
    return SizingInput(
        model=model_spec(pool.model),
        operating_points=(point_spec(pool.operating_point),),
        accelerators=(accelerator_spec(pool.accelerator),),
        arrival_rate_rps=rps,
        prompt_tokens=shape.prompt,
        output_tokens=shape.output,
        slo=Slo(ttft_p99_s=req.ttft_p99_ms / 1000.0, tpot_p99_s=req.tpot_p99_ms / 1000.0),
        failure_policy=pool.failure_policy,
        zones=max(1, len(pool.replicas_per_zone())),
        allow_ceiling=pool.operating_point.is_ceiling,
        sim_requests=5000,
    )


def committed_fit(*, pool: Pool, rps: float, req: Any) -> PoolFit:
    needed = (*ENVELOPE_LENGTHS, "ttft_p99_ms", "tpot_p99_ms")
    if rps <= 0 or any(getattr(req, n) is None for n in needed):
        return PoolFit(error="fill in the envelope and a committed rate")
    shape = launch_shape(req)
    if shape is None:
        return PoolFit(error="fill in the envelope and a committed rate")
    try:
        result = size(pool_sizing_input(pool, rps, req, shape))
    except SizingInputError as exc:
        nearest = _nearest_feasible(pool, req) if exc.field == "slo" else (None, None)
        return PoolFit(
            failure_policy=pool.failure_policy,
            error=f"{exc.field}: {exc.message}",
            nearest_ttft_ms=nearest[0],
            nearest_tpot_ms=nearest[1],
            target_ttft_ms=req.ttft_p99_ms,
            target_tpot_ms=req.tpot_p99_ms,
        )
    return PoolFit(
        steady=result.replicas.steady,
        with_failure=result.replicas.with_failure,
        kv_fits=result.kv_fits,
        failure_policy=pool.failure_policy,
    )
