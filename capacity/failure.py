"""Failure policies (docs/contract.md §2): `replica:n`, `zone`, `fraction:f`, or `none`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Kind = Literal["none", "replica", "zone", "fraction"]


@dataclass(frozen=True)
class FailurePolicy:
    kind: Kind
    n: int = 0
    f: float = 0.0

    def __str__(self) -> str:
        if self.kind == "replica":
            return f"replica:{self.n}"
        if self.kind == "fraction":
            return f"fraction:{self.f:g}"
        return self.kind

    def describe(self) -> str:
        if self.kind == "replica":
            return f"lose {self.n} replica{'s' if self.n != 1 else ''}"
        if self.kind == "zone":
            return "lose the largest zone"
        if self.kind == "fraction":
            return f"lose ⌈{self.f:g} × replicas⌉"
        return "no failure planned"


def parse_failure_policy(text: str) -> FailurePolicy:
    """Parse `replica:n`, `zone`, `fraction:f` or `none`; raise ValueError naming what is wrong."""
    raw = (text or "").strip().lower()
    if raw in ("", "none"):
        return FailurePolicy("none")
    if raw == "zone":
        return FailurePolicy("zone")
    kind, _, arg = raw.partition(":")
    if kind == "replica":
        try:
            n = int(arg)
        except ValueError:
            raise ValueError(f"failure_policy '{text}': replica:n needs a whole number n") from None
        if n < 0:
            raise ValueError(f"failure_policy '{text}': n must be ≥ 0")
        return FailurePolicy("replica", n=n)
    if kind == "fraction":
        try:
            f = float(arg)
        except ValueError:
            raise ValueError(f"failure_policy '{text}': fraction:f needs a number f") from None
        if not 0 <= f < 1:
            raise ValueError(f"failure_policy '{text}': f must be in [0, 1)")
        return FailurePolicy("fraction", f=f)
    raise ValueError(f"failure_policy '{text}': expected replica:n, zone, fraction:f or none")


def replicas_lost(policy: FailurePolicy, replicas_per_zone: tuple[int, ...]) -> int:
    """Replicas a pool loses in the stated failure."""
    total = sum(replicas_per_zone)
    if policy.kind == "replica":
        return min(policy.n, total)
    if policy.kind == "zone":
        return max(replicas_per_zone, default=0)
    if policy.kind == "fraction":
        return min(total, math.ceil(policy.f * total - 1e-9))
    return 0


def replicas_for_failure(steady: int, policy: FailurePolicy, zones: int) -> int:
    """Fewest whole replicas that still leave `steady` after the stated failure.

    `zone` spreads replicas evenly over Z zones: ⌈steady × Z / (Z − 1)⌉.
    """
    if steady < 0:
        raise ValueError("steady must be ≥ 0")
    if steady == 0:
        return 0
    if policy.kind == "replica":
        return steady + policy.n
    if policy.kind == "zone":
        if zones < 2:
            raise ValueError("zones: a zone failure policy needs at least 2 zones")
        return math.ceil(steady * zones / (zones - 1) - 1e-9)
    if policy.kind == "fraction":
        n = steady
        while n - math.ceil(policy.f * n - 1e-9) < steady:
            n += 1
        return n
    return steady
