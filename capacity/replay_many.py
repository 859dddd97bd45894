"""Many planning replays at once: every draw of an envelope through its own bucket, one array pass per step.

The rule is capacity.planning's (`throttled_count`): between throttles the level has a closed form, one
cumulative sum and one running minimum over a window of requests; the first request the level cannot
cover is throttled (not charged) and the next window starts just after it. Here each draw is a row and
all rows advance together: a step gathers a window from every row still running, at its own position,
rate and depth (a 2-D array), and each row moves on by its own throttle or by the whole window. A row
stops when it is through, or once its throttles pass `stop_after` (a search only needs to know it
failed). Sixty-four draws cost a few dozen array passes instead of 64 Python loops (bench/sizing.py).

`least_steps` finds each draw's least CU on the 0.1 CU grid together: every row gallops from its own
guess to a bracket and then bisects, each round one replay of the rows still searching.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from capacity.planning import CU_STEP, FloatArray, Workload, enough_steps

IntArray = npt.NDArray[np.int64]

# Requests per row and step: a throttle wastes the rest of its window, a short window costs more steps.
_WINDOW = 512


class Rows:
    """Draws as rows of one matrix, each padded past its end with requests that cost -1 at its last
    time (never throttled, never read as a row's own): a window is a plain slice of its row."""

    def __init__(self, draws: Sequence[Workload]) -> None:
        self.sizes: IntArray = np.array([len(w) for w in draws], dtype=np.int64)
        width = int(self.sizes.max(initial=0)) + _WINDOW
        k = len(draws)
        self.t: FloatArray = np.zeros((k, width))
        self.c: FloatArray = np.full((k, width), -1.0)
        for i, w in enumerate(draws):
            n = len(w)
            self.t[i, :n] = w.arrival_s
            self.t[i, n:] = w.arrival_s[-1] if n else 0.0
            self.c[i, :n] = w.cost_wt
        # What each request finds charged before it in its row, so a window needs no cumulative sum.
        self.before: FloatArray = np.cumsum(self.c, axis=1) - self.c
        self.total: FloatArray = np.maximum(self.c, 0.0).sum(axis=1)

    def __len__(self) -> int:
        return len(self.sizes)

    def costly(self) -> IntArray:
        """Each row's requests that cost anything (what no bucket at all throttles)."""
        out: IntArray = np.count_nonzero(self.c > 0, axis=1).astype(np.int64)
        return out


def throttled_counts(
    rows: Rows,
    cu: FloatArray,
    r_wt_per_s: float,
    depth_s: float,
    *,
    which: IntArray | None = None,
    stop_after: IntArray | None = None,
) -> IntArray:
    """Requests throttled in each row of `which` (default all) replayed at its own `cu` (one per row of
    `which`); a row's counting stops once it passes its `stop_after`.

    With g_i = rate × t_i − (the row's cost before i), the level before i in a window starting at s
    (and running up to the first throttle) is g_i + min(level_s − g_s, min_{s<m≤i}(depth − g_m)); an
    earlier throttle's uncharged cost shifts every g of the window alike, so it drops out."""
    sel = np.arange(len(rows)) if which is None else np.asarray(which, dtype=np.int64)
    k = len(sel)
    thr = np.zeros(k, dtype=np.int64)
    rate = np.asarray(cu, dtype=np.float64) * r_wt_per_s
    depth = rate * depth_s
    pos = np.zeros(k, dtype=np.int64)
    size = rows.sizes[sel]
    level = depth.copy()
    at = rows.t[sel, 0].copy()
    limit = np.full(k, np.iinfo(np.int64).max) if stop_after is None else np.asarray(stop_after, dtype=np.int64)
    live = np.flatnonzero(pos < size)
    lanes = np.arange(_WINDOW)
    t, c, before = rows.t.ravel(), rows.c.ravel(), rows.before.ravel()
    width = rows.t.shape[1]
    while len(live):
        at_flat = (sel[live] * width + pos[live])[:, None] + lanes
        tt = np.take(t, at_flat)
        cc = np.take(c, at_flat)
        r, d = rate[live], depth[live]
        g = r[:, None] * tt - np.take(before, at_flat)
        p0 = np.minimum(d, level[live] + r * np.maximum(0.0, tt[:, 0] - at[live]))
        h = d[:, None] - g
        h[:, 0] = p0 - g[:, 0]
        pre = g + np.minimum.accumulate(h, axis=1)
        short = pre < cc
        hit = short.any(axis=1)
        j = np.where(hit, short.argmax(axis=1), np.minimum(_WINDOW, size[live] - pos[live]) - 1)
        lane = np.arange(len(live))
        here = pre[lane, j]
        spent = cc[lane, j]
        level[live] = np.where(hit, here, here - spent)
        at[live] = tt[lane, j]
        pos[live] += j + 1
        thr[live] += hit
        live = live[(pos[live] < size[live]) & (thr[live] <= limit[live])]
    return thr


def least_steps(
    rows: Rows, *, r_wt_per_s: float, allowed: IntArray, guess: IntArray, depth_s: float
) -> tuple[IntArray, IntArray]:
    """Each row's least CU in 0.1 CU steps (at least one step) at which at most `allowed` of its requests
    are throttled, and for rows with nothing to search (no requests) 0. Rows gallop from `guess` (a
    step) by doubling gaps until bracketed, then bisect; returns (steps, rows_without_an_answer).

    The search is bounded: a bucket holding a row's whole cost at its first arrival throttles nothing
    (`enough_steps`), so no row gallops past that; only a row with a cost that is not a finite number
    has no answer."""
    k = len(rows)
    lo = np.zeros(k, dtype=np.int64)  # known to fail (0 = no bucket)
    hi = np.full(k, -1, dtype=np.int64)  # known to pass (-1 = not yet)
    empty = rows.sizes == 0
    hi[empty] = 0
    lost = ~np.isfinite(rows.total)
    cap = enough_steps(np.where(lost, 0.0, rows.total), r_wt_per_s, depth_s)
    probe = np.maximum(1, np.minimum(np.asarray(guess, dtype=np.int64), cap))
    # The first gaps are a sixteenth of the guess: a 0.1 CU step is nothing beside a 10⁹ CU answer.
    gap = np.maximum(1, probe // 16)
    while True:
        searching = np.flatnonzero((hi < 0) | (hi - lo > 1))
        searching = searching[~empty[searching] & ~lost[searching]]
        if not len(searching):
            break
        p = probe[searching]
        thr = throttled_counts(rows, p * CU_STEP, r_wt_per_s, depth_s, which=searching,
                               stop_after=allowed[searching])  # fmt: skip
        ok = thr <= allowed[searching]
        lo_s, hi_s, gap_s = lo[searching], hi[searching], gap[searching]
        hi_s = np.where(ok, p, hi_s)
        lo_s = np.where(ok, lo_s, np.maximum(lo_s, p))
        bracketed = (hi_s >= 0) & (hi_s - lo_s <= 2 * gap_s)
        # Galloping: down from a pass, up from a fail, the gap doubling; bisecting once both ends are known.
        gap_s = np.where(bracketed, gap_s, gap_s * 2)
        down = np.maximum(lo_s + 1, hi_s - gap_s)
        up = np.minimum(lo_s + gap_s, cap[searching])
        mid = (lo_s + hi_s) // 2
        known_lo = lo_s > 0
        nxt = np.where(hi_s < 0, up, np.where(known_lo | (hi_s - gap_s <= lo_s), mid, down))
        lo[searching], hi[searching], gap[searching] = lo_s, hi_s, gap_s
        probe[searching] = np.maximum(1, nxt)
        lost[searching] = (hi_s < 0) & (lo_s >= cap[searching])
    return np.where(lost, -1, hi), np.flatnonzero(lost)
