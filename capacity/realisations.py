"""A stated envelope's planning answer across many draws (docs/planning.md, issue 45.2).

One seeded hour of an arrival model is a property of its seed, not of the envelope: steady 5 req/s
sized on draw 0 failed its target on 17 of 20 fresh draws. So an envelope is answered across
`realisations` independent draws (default 64, at least 32): each draw's least CU is found by the
planning replay rule, all draws searched together (capacity.replay_many), and `cu_to_buy` is the least CU at which at least
`realisation_quantile` (default 0.95) of the draws meet the target, i.e. the ⌈q·n⌉-th smallest of
the draws' own answers (a draw that passes at some CU passes at every larger one).

The draws are common random numbers (capacity.planning_workload.uniforms: draw k is the same world
whatever the rate, CV or target), so each draw's answer never falls as the rate, the CV or the
strictness of the target rises, and neither does their quantile.

The check shown beside the answer: at `cu_to_buy` the share of draws that hold is at least the
quantile; one step less it is not; `replay` and `replay_one_step_less` pool the draws' requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.lengths import LengthSpec
from capacity.planning import (
    CU_STEP,
    DEFAULT_DEPTH_S,
    TARGET_RANGE,
    PlanningAnswer,
    Replay,
    Workload,
    allowed_throttles,
    cu_of,
)
from capacity.planning_workload import DEFAULT_MINUTE_RATE_CV, envelope_workloads
from capacity.replay_many import Rows, least_steps, throttled_counts

DEFAULT_REALISATIONS = 64
MIN_REALISATIONS = 32
MAX_REALISATIONS = 256
DEFAULT_QUANTILE = 0.95
QUANTILE_RANGE = (0.5, 0.999)
# All draws together stay under this many simulated requests (a launch request's sizing is bounded):
# past it each draw spans fewer minutes, then bundles requests (capacity.planning_workload).
TOTAL_REQUESTS = 1_200_000  # 64 draws of 5 req/s (1.15 million requests) are not bundled


@dataclass(frozen=True)
class Realisations:
    n: int
    quantile: float
    cu: tuple[float, ...]  # each draw's own least CU, in draw order
    holding: int  # draws that meet the target at cu_to_buy
    holding_one_step_less: int

    def percentile(self, q: float) -> float:
        return round(float(np.percentile(self.cu, q)), 1)

    @property
    def needed(self) -> int:
        return math.ceil(self.quantile * self.n - 1e-9)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "quantile": self.quantile,
            "cu_p5": self.percentile(5),
            "cu_p50": self.percentile(50),
            "cu_p95": self.percentile(95),
            "holding": self.holding,
            "holding_one_step_less": self.holding_one_step_less,
        }

    def words(self, cu: float) -> str:
        """ "2.1 CU holds on 61 of 64 simulated hours (95 % asked); a calm hour needs 1.6, a rough one 2.4"."""
        return (
            f"{cu:.1f} CU holds on {self.holding} of {self.n} simulated hours ({self.quantile * 100:g} % asked); "
            f"a calm hour needs {self.percentile(5):.1f}, a typical one {self.percentile(50):.1f}, "
            f"a rough one {self.percentile(95):.1f}"
        )


def across(
    draws: Sequence[Workload],
    *,
    r_wt_per_s: float,
    target_throttled_share: float,
    quantile: float = DEFAULT_QUANTILE,
    depth_s: float = DEFAULT_DEPTH_S,
) -> tuple[PlanningAnswer, Realisations]:
    """The envelope's answer across `draws` (each one realisation), and the spread of their answers.

    Every draw's least CU is searched together (capacity.replay_many: one array replay of all draws
    still searching per step), from a guess at the draw's mean rate."""
    low, high = QUANTILE_RANGE
    if not low <= quantile <= high:
        raise ValueError(f"realisation_quantile must be in [{low}, {high}]")
    if not draws:
        raise ValueError("at least one draw is needed")
    lo_t, hi_t = TARGET_RANGE
    if not lo_t <= target_throttled_share <= hi_t:
        raise ValueError(f"target_throttled_share must be in [{lo_t}, {hi_t}]")
    rows = Rows(draws)
    allowed = np.array([allowed_throttles(len(w), target_throttled_share) for w in draws], dtype=np.int64)
    steps, lost = least_steps(rows, r_wt_per_s=r_wt_per_s, allowed=allowed, guess=_guess(draws, r_wt_per_s, depth_s),
                              depth_s=depth_s)  # fmt: skip
    if len(lost):
        raise ValueError("no bucket size meets the target (a request costs more than any bucket holds)")
    need = math.ceil(quantile * len(draws) - 1e-9)
    at = int(np.sort(steps)[need - 1])
    cu, less = cu_of(at), cu_of(max(at - 1, 0))
    every = np.arange(len(draws))
    thr_at = throttled_counts(rows, np.full(len(draws), cu), r_wt_per_s, depth_s)
    thr_less = (
        throttled_counts(rows, np.full(len(draws), less), r_wt_per_s, depth_s, which=every) if at > 1 else rows.costly()
    )
    spread = Realisations(
        n=len(draws),
        quantile=quantile,
        cu=tuple(cu_of(int(s)) for s in steps),
        holding=int(np.count_nonzero(steps <= at)),
        holding_one_step_less=int(np.count_nonzero(steps <= at - 1)),
    )
    requests = int(rows.sizes.sum())
    pooled = Replay(cu, int(thr_at.sum()), requests)
    pooled_less = Replay(less, int(thr_less.sum()), requests)
    first = draws[0].basis.split(", draw ")[0]
    basis = f"{first}; {len(draws)} independent draws (common random numbers); {spread.words(cu)}"
    answer = PlanningAnswer(cu, target_throttled_share, pooled, pooled_less, basis, spread)
    return answer, spread


def _guess(draws: Sequence[Workload], r_wt_per_s: float, depth_s: float) -> npt.NDArray[np.int64]:
    """Each draw's mean rate in 0.1 CU steps (its answer is near it; the search gallops from there)."""
    out = []
    for w in draws:
        span = float(w.arrival_s[-1] - w.arrival_s[0]) if len(w) else 0.0
        out.append(math.ceil(float(w.cost_wt.sum()) / max(span, depth_s) / r_wt_per_s / CU_STEP))
    return np.maximum(1, np.array(out, dtype=np.int64))


def per_draw(n: int) -> int:
    """Each draw's share of the simulated requests allowed to one answer."""
    return max(1_000, TOTAL_REQUESTS // max(n, 1))


def envelope_answer(
    *,
    rate_rps: float,
    prompt: LengthSpec,
    output: LengthSpec,
    w_out: float,
    r_wt_per_s: float,
    target_throttled_share: float,
    w_cached: float = 0.0,
    cache_hit_ratio: float = 0.0,
    cancellation_ratio: float = 0.0,
    minute_rate_cv: float = DEFAULT_MINUTE_RATE_CV,
    realisations: int = DEFAULT_REALISATIONS,
    quantile: float = DEFAULT_QUANTILE,
    depth_s: float = DEFAULT_DEPTH_S,
    seed: int = 0,
) -> PlanningAnswer:
    """The planning answer of a stated envelope: draws seed … seed + realisations − 1 (module docstring)."""
    if not MIN_REALISATIONS <= realisations <= MAX_REALISATIONS:
        raise ValueError(f"realisations must be in [{MIN_REALISATIONS}, {MAX_REALISATIONS}]")
    draws = envelope_workloads(
        range(seed, seed + realisations),
        rate_rps=rate_rps,
        prompt=prompt,
        output=output,
        w_out=w_out,
        w_cached=w_cached,
        cache_hit_ratio=cache_hit_ratio,
        cancellation_ratio=cancellation_ratio,
        minute_rate_cv=minute_rate_cv,
        per_draw=per_draw(realisations),
    )
    answer, _ = across(draws, r_wt_per_s=r_wt_per_s, target_throttled_share=target_throttled_share,
                       quantile=quantile, depth_s=depth_s)  # fmt: skip
    return answer
