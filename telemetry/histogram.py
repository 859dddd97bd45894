"""Fixed log-spaced histograms (latency in ms, lengths in tokens): percentiles that merge across
minutes by adding counts.

Edges are 10^(i/5) ms for i = 0…30 (1 ms … 1000 s, ×1.585 per bin). Bin 0 holds < 1 ms, bin k
holds [edge[k−1], edge[k]), the last bin holds ≥ 1000 s. A percentile is read by interpolating
geometrically inside its bin, so it is within one bin width (±26 %) of the exact value. Token
lengths use the same edges read as tokens (bin 0: an empty prompt or output, last: ≥ 10^6 tokens).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

EDGES_MS: tuple[float, ...] = tuple(10 ** (i / 5) for i in range(31))
N_BINS = len(EDGES_MS) + 1


def bin_fields(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}_b{i:02d}" for i in range(N_BINS))


def bin_of(ms: float) -> int:
    return bisect.bisect_right(EDGES_MS, ms)


def percentile(
    counts: Sequence[int], q: float, lowest: float | None = None, highest: float | None = None
) -> float | None:
    """q in (0, 1]. None when the histogram is empty.

    `lowest` / `highest`: the smallest and largest value counted, when the caller kept them (the
    rollups keep each length's exact maximum and minimum). The bin holding the rank is then narrowed
    to them before interpolating, so a percentile never lies outside the data (issue 33: a p95 of
    2,391 read from a bin whose data stopped at 1,900)."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, c in enumerate(counts):
        if c and seen + c >= rank:
            lo = 0.0 if i == 0 else EDGES_MS[i - 1]
            hi = EDGES_MS[i] if i < N_BINS - 1 else math.inf
            if lowest is not None:
                lo = min(max(lo, lowest), hi)
            if highest is not None:
                hi = max(min(hi, highest), lo)
            if math.isinf(hi):  # the open last bin with no maximum known: its lower edge
                return lo
            frac = (rank - seen) / c
            if lo <= 0 or lo == hi:
                return lo + (hi - lo) * frac
            return min(hi, lo * math.exp(math.log(hi / lo) * frac))  # exp/log may round past hi
        seen += c
    return EDGES_MS[-1] if highest is None else highest
