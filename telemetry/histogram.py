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


def percentile(counts: Sequence[int], q: float) -> float | None:
    """q in (0, 1]. None when the histogram is empty."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, c in enumerate(counts):
        if c and seen + c >= rank:
            lo = 0.0 if i == 0 else EDGES_MS[i - 1]
            if i == N_BINS - 1:
                return lo
            hi = EDGES_MS[i]
            frac = (rank - seen) / c
            if lo <= 0:
                return hi * frac
            return lo * math.exp(math.log(hi / lo) * frac)
        seen += c
    return EDGES_MS[-1]
