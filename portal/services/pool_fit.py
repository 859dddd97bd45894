"""Does a launch's committed load fit a pool's measured operating point? capacity.sizing answers.

The CU arithmetic (conversion.py) says how much; this says whether the pool's operating point meets
the request's latency SLO at all, how many replicas its failure policy needs, and whether the KV
tail fits in memory, from the same envelope lengths the CU uses (conversion.launch_shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capacity.input_errors import SizingInputError
from capacity.operating_points import Slo
from capacity.sizing import SizingInput, size
from entitlements.models import Pool
from entitlements.sizing_specs import accelerator_spec, model_spec, point_spec
from portal.services.conversion import launch_shape


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


def committed_fit(*, pool: Pool, rps: float, req: Any) -> PoolFit:
    needed = ("prompt_p50", "prompt_p95", "max_prompt_tokens", "output_p50", "output_p95", "max_output_tokens",
              "ttft_p99_ms", "tpot_p99_ms")  # fmt: skip
    if rps <= 0 or any(getattr(req, n) is None for n in needed):
        return PoolFit(error="fill in the envelope and a committed rate")
    shape = launch_shape(req)
    if shape is None:
        return PoolFit(error="fill in the envelope and a committed rate")
    try:
        result = size(
            SizingInput(
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
        )
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
