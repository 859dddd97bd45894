"""The planning answer: the CU to buy for a workload, checked by replaying it through one bucket.

One rule answers the calculator, intake, reconciliation's right-size and grow, and the supply
gap's demand (docs/planning.md). The replay: requests arrive at the workload's own times; each
costs its weighted tokens, charged at arrival and settled at once; the bucket refills at
`CU × R` wt/s (capacity.bucket.refilled, the admission backend's own rule), holds `depth_s` of
that and is full at the first arrival; a request is admitted when the level covers its cost,
else throttled and not charged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from capacity.bucket import refilled

if TYPE_CHECKING:
    from capacity.realisations import Realisations

FloatArray = npt.NDArray[np.float64]

CU_STEP = 0.1
DEFAULT_TARGET = 0.001
TARGET_RANGE = (0.0001, 0.5)
DEFAULT_DEPTH_S = 60.0
# The replay walks windows of requests at once; a throttle restarts the window just after it.
_MIN_WINDOW, _MAX_WINDOW = 32, 1 << 16


@dataclass(frozen=True, eq=False)
class Workload:
    """Requests in arrival order (seconds, any origin) with their weighted tokens; `basis` says in
    words where the times and costs came from."""

    arrival_s: FloatArray
    cost_wt: FloatArray
    basis: str
    # Recorded traffic: the share its own limits throttled when it was sent (a replay at the CU then
    # bought must give it back); None for a trace or an envelope.
    recorded_throttled_share: float | None = None

    def __post_init__(self) -> None:
        if self.arrival_s.shape != self.cost_wt.shape:
            raise ValueError("arrival_s and cost_wt must be the same length")

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class Replay:
    cu: float
    throttled: int
    requests: int

    @property
    def throttled_share(self) -> float:
        return self.throttled / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"cu": self.cu, "throttled_share": self.throttled_share, "requests": self.requests}


@dataclass(frozen=True)
class PlanningAnswer:
    cu_to_buy: float
    target_throttled_share: float
    replay: Replay
    replay_one_step_less: Replay
    planning_basis: str
    # A stated envelope's answer across draws (capacity.realisations); None for recorded traffic or a trace.
    realisations: Realisations | None = None

    @property
    def holds(self) -> bool:
        """The answer's own check: at or under the target at cu_to_buy, over it one step less
        (or one step less is no bucket at all). Across draws: enough draws hold at cu_to_buy, too
        few one step less."""
        target = self.target_throttled_share
        spread = self.realisations
        if spread is not None:
            return spread.holding >= spread.needed and (
                self.replay_one_step_less.cu <= 0 or spread.holding_one_step_less < spread.needed
            )
        less = self.replay_one_step_less
        return self.replay.throttled_share <= target and (less.cu <= 0 or less.throttled_share > target)

    @property
    def check(self) -> str:
        """ "3.0 CU: replayed, 0.04 % throttled (target 0.1 %); at 2.9 CU 0.13 %"."""
        less = self.replay_one_step_less
        spread = self.realisations
        if spread is not None:
            return (
                f"{spread.words(self.cu_to_buy)}; at {less.cu:.1f} CU {spread.holding_one_step_less} of {spread.n} "
                f"hold (target {percent(self.target_throttled_share)} throttled in each hour)"
            )
        return (
            f"{self.cu_to_buy:.1f} CU: replayed {self.replay.requests:,} requests, {percent(self.replay.throttled_share)} "
            f"throttled (target {percent(self.target_throttled_share)}); at {less.cu:.1f} CU "
            f"{percent(less.throttled_share)}"
        )

    def to_dict(self) -> dict[str, object]:
        less = self.replay_one_step_less
        return {
            "cu_to_buy": self.cu_to_buy,
            "target_throttled_share": self.target_throttled_share,
            "replay": self.replay.to_dict(),
            "replay_one_step_less": {"cu": less.cu, "throttled_share": less.throttled_share},
            "planning_basis": self.planning_basis,
            "check": self.check,
            "check_holds": self.holds,
            **({"realisations": self.realisations.to_dict()} if self.realisations is not None else {}),
        }


def percent(share: float) -> str:
    """A share as people write it, to three figures: 0.0004 → "0.04 %", 0.001 → "0.1 %", 0.00103 →
    "0.103 %" (never rounded onto the target it is compared with), 0.0895 → "8.95 %"."""
    pct = share * 100
    if pct == 0:
        return "0 %"
    text = f"{pct:.3g}"
    # At most four decimals (people's pages never print more; the smallest target is 0.01 %).
    if "e" in text or len(text.partition(".")[2]) > 4:
        text = f"{pct:.4f}".rstrip("0").rstrip(".")
        if text == "0":
            return "< 0.0001 %"
    return f"{text} %"


def cu_of(steps: int) -> float:
    """A whole number of 0.1 CU steps as the float people write (29 → 2.9, not 2.9000000000000004)."""
    return steps / 10


def weighted_costs(
    prompt: npt.ArrayLike,
    output: npt.ArrayLike,
    *,
    w_out: float,
    w_cached: float = 0.0,
    cache_hit_ratio: float = 0.0,
) -> FloatArray:
    """Each request's weighted tokens: uncached + w_cached × cached prompt + w_out × output."""
    p = np.asarray(prompt, dtype=np.float64)
    o = np.asarray(output, dtype=np.float64)
    return (1 - cache_hit_ratio) * p + w_cached * cache_hit_ratio * p + w_out * o


def throttled_count(
    w: Workload, cu: float, r_wt_per_s: float, depth_s: float = DEFAULT_DEPTH_S, *, stop_after: int | None = None
) -> int:
    """Requests throttled replaying `w` through a bucket of `cu` CU; counting stops once it passes
    `stop_after` (the caller only needs to know it is over).

    Between throttles the level has a closed form: with a_i = rate × (t_i − t_s) − (cost charged
    from s up to i), the level before request i is a_i + min(level_s, min_{s<j≤i}(depth − a_j))
    (the cap binds at the latest j where the bucket was full), so a window is one cumulative sum and
    one running minimum; the first request it cannot cover is throttled and the next window starts
    after it, from the level it left (uncharged).
    """
    n = len(w)
    if n == 0:
        return 0
    rate = cu * r_wt_per_s
    depth = rate * depth_s
    t, c = w.arrival_s, w.cost_wt
    throttled, s = 0, 0
    level, at = depth, float(t[0])
    window = _MIN_WINDOW
    while s < n:
        e = min(n, s + window)
        tt, cc = t[s:e], c[s:e]
        p0 = refilled(level, rate, depth, float(tt[0]) - at)
        a = rate * (tt - tt[0])
        a[1:] -= np.cumsum(cc[:-1])
        floor = np.empty_like(a)
        floor[0] = p0
        floor[1:] = depth - a[1:]
        pre = a + np.minimum.accumulate(floor)
        short = np.flatnonzero(pre < cc)
        if len(short) == 0:
            level, at = float(pre[-1] - cc[-1]), float(tt[-1])
            s = e
            window = min(window * 2, _MAX_WINDOW)
            continue
        j = int(short[0])
        throttled += 1
        if stop_after is not None and throttled > stop_after:
            return throttled
        level, at = float(pre[j]), float(tt[j])
        s += j + 1
        window = max(_MIN_WINDOW, 2 * j)
    return throttled


def replay(w: Workload, cu: float, r_wt_per_s: float, depth_s: float = DEFAULT_DEPTH_S) -> Replay:
    return Replay(cu, throttled_count(w, cu, r_wt_per_s, depth_s), len(w))


def _passes(w: Workload, steps: int, r: float, depth_s: float, allowed: int) -> bool:
    return throttled_count(w, cu_of(steps), r, depth_s, stop_after=allowed) <= allowed


def plan(
    w: Workload,
    *,
    r_wt_per_s: float,
    target_throttled_share: float = DEFAULT_TARGET,
    depth_s: float = DEFAULT_DEPTH_S,
) -> PlanningAnswer:
    """The least CU on a 0.1 CU step at which `w` is throttled on at most the target share.

    A doubling search from the workload's mean rate brackets the answer, then a bisection finds the
    step where it passes and one step less does not. Counting stops as soon as a replay is over the
    target, so a failing step costs only the requests up to its (target × n + 1)-th throttle.
    """
    low, high = TARGET_RANGE
    if not (low <= target_throttled_share <= high):
        raise ValueError(f"target_throttled_share must be in [{low}, {high}]")
    if r_wt_per_s <= 0 or depth_s <= 0:
        raise ValueError("r_wt_per_s and depth_s must be positive")
    n = len(w)
    if n == 0:
        none = Replay(0.0, 0, 0)
        return PlanningAnswer(0.0, target_throttled_share, none, none, w.basis)
    allowed = allowed_throttles(n, target_throttled_share)
    span = float(w.arrival_s[-1] - w.arrival_s[0]) if n else 0.0
    total = float(w.cost_wt.sum()) if n else 0.0
    mean_cu = total / max(span, depth_s) / r_wt_per_s
    hi = max(1, math.ceil(mean_cu / CU_STEP))
    lo = 0  # no bucket: everything that costs anything is throttled
    if not math.isfinite(total):
        raise ValueError("a request's weighted tokens are not a finite number")
    # A bucket holding the whole workload at its first arrival throttles nothing: the search stops there.
    cap = int(enough_steps(np.array([total]), r_wt_per_s, depth_s)[0])
    hi = min(hi, cap)
    while not _passes(w, hi, r_wt_per_s, depth_s, allowed):
        if hi >= cap:  # only rounding past any sense could get here
            raise ValueError("no bucket size meets the target")
        lo = hi
        hi = min(hi * 2, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _passes(w, mid, r_wt_per_s, depth_s, allowed):
            hi = mid
        else:
            lo = mid
    at = replay(w, cu_of(hi), r_wt_per_s, depth_s)
    less = replay(w, cu_of(hi - 1), r_wt_per_s, depth_s) if hi > 1 else Replay(0.0, _costly(w), n)
    return PlanningAnswer(cu_of(hi), target_throttled_share, at, less, w.basis)


def enough_steps(total_wt: FloatArray, r_wt_per_s: float, depth_s: float) -> npt.NDArray[np.int64]:
    """Steps of 0.1 CU at which a bucket, full at the first arrival, holds `total_wt` (a workload's whole
    cost): nothing is throttled there, so no search for the least CU need look further (one step spare
    for rounding)."""
    return np.maximum(1, np.ceil(total_wt / (r_wt_per_s * depth_s * CU_STEP)).astype(np.int64) + 1)


def allowed_throttles(n: int, target_throttled_share: float) -> int:
    """The most throttles `n` requests may see, compared exactly as a reader would: throttled / n ≤ target."""
    allowed = math.floor(target_throttled_share * n)
    while allowed + 1 <= n and (allowed + 1) / n <= target_throttled_share:
        allowed += 1
    while allowed > 0 and allowed / n > target_throttled_share:
        allowed -= 1
    return allowed


def _costly(w: Workload) -> int:
    """At 0 CU the bucket holds nothing: every request that costs anything is throttled."""
    return int(np.count_nonzero(w.cost_wt > 0))
