"""The token bucket's refill, one rule for the in-process admission backend and the planning replay.

A bucket last at `level` refills at `rate` per second and never holds more than `depth`; time
never runs backwards for it (a clock read twice under a lock may repeat, never retreat). See
docs/planning.md.
"""

from __future__ import annotations


def refilled(level: float, rate: float, depth: float, elapsed_s: float) -> float:
    """The level `elapsed_s` seconds after it was `level`."""
    return min(depth, level + rate * max(0.0, elapsed_s))
