"""Scenario → capacity units, in one place so a fuller sizing model can replace it later.

wt/s = rps × (prompt_p50 + w_out × output_p50)   (prompt uncached: a launch promise should not
depend on a cache hit ratio nobody has measured yet), or wt/min ÷ 60; CU = wt/s ÷ R.
"""

from __future__ import annotations

import math

from capacity.units import TokenWeights, weighted_tokens, wt_per_s_to_cu

RPS = "rps"
WT_PER_MIN = "wt_per_min"


def scenario_cu(
    *, basis: str, value: float, prompt_p50: float, output_p50: float, w_out: float, w_cached: float, r_wt_per_s: float
) -> float:
    if value < 0:
        raise ValueError("a scenario rate cannot be negative")
    if basis == RPS:
        per_request = weighted_tokens(prompt=prompt_p50, output=output_p50, weights=TokenWeights(w_out, w_cached))
        wt_per_s = value * per_request
    elif basis == WT_PER_MIN:
        wt_per_s = value / 60.0
    else:
        raise ValueError(f"unknown scenario basis '{basis}'")
    return wt_per_s_to_cu(wt_per_s, r_wt_per_s)


def replicas_for(cu: float, cu_per_replica: float) -> int:
    """Whole replicas that carry `cu`; a tiny epsilon keeps 140.0000001 / 70 from becoming 3."""
    if cu <= 0:
        return 0
    return math.ceil(cu / cu_per_replica - 1e-9)
