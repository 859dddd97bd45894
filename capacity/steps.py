"""One intermediate number with the arithmetic that produced it, for pages that show their work."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """`formula` repeats the actual numbers, e.g. "mean concurrency 105 = 10 req/s × 10.5 s"."""

    name: str
    value: float
    unit: str
    formula: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "value": finite_or_none(self.value), "unit": self.unit, "formula": self.formula}


def num(x: float) -> str:
    """A number as people read it: thousands separated, about four significant digits."""
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        text = f"{x:.1f}"
    elif ax >= 1:
        text = f"{x:.3f}"
    elif ax == 0:
        return "0"
    else:
        text = f"{x:.4g}"
        return text
    return text.rstrip("0").rstrip(".")


def finite_or_none(x: float) -> float | None:
    """JSON has no infinity: an undefined ratio (nothing to divide by) becomes null."""
    return x if math.isfinite(x) else None


def ceil_whole(x: float) -> int:
    """Whole replicas; the small tolerance keeps 3.0000000000004 from becoming 4."""
    if x <= 0:
        return 0
    return math.ceil(x - 1e-9)
