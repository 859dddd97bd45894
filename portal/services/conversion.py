"""Launch request → capacity units, in one place: intake, review, approval and sizing all use
`launch_shape` (capacity.envelope: capped lognormals through the envelope's p50 and p95, their
means for rates), so the launch form and the sizing calculator cannot disagree on a class's CU.

wt/s = rps × (mean prompt + w_out × mean output)   (prompt uncached), or wt/min ÷ 60; CU = wt/s ÷ R.
"""

from __future__ import annotations

import math
from typing import Any

from capacity.envelope import EnvelopeShape, envelope_shape, rps_to_cu
from capacity.units import TokenWeights, wt_per_s_to_cu

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
