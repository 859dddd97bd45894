"""Deliverable capacity of a pool (docs/contract.md §2), term by term so people can see each one."""

from __future__ import annotations

from dataclasses import dataclass

from capacity.failure import FailurePolicy, replicas_lost


@dataclass(frozen=True)
class PoolSupply:
    replicas_per_zone: tuple[int, ...]
    cu_per_replica: float
    maintenance_pct: float = 0.0
    safety_pct: float = 0.0
    fragmentation_pct: float = 0.0
    reserve_held_cu: float = 0.0

    def __post_init__(self) -> None:
        if any(r < 0 for r in self.replicas_per_zone):
            raise ValueError("replicas_per_zone must be ≥ 0")
        if self.cu_per_replica < 0:
            raise ValueError("cu_per_replica must be ≥ 0")
        for name in ("maintenance_pct", "safety_pct", "fragmentation_pct"):
            v = getattr(self, name)
            if not 0 <= v <= 100:
                raise ValueError(f"{name} must be within 0–100")
        if self.reserve_held_cu < 0:
            raise ValueError("reserve_held_cu must be ≥ 0")

    @property
    def replicas(self) -> int:
        return sum(self.replicas_per_zone)


@dataclass(frozen=True)
class Deliverable:
    physical: float
    failover_reserve: float
    maintenance: float
    safety: float
    fragmentation: float

    @property
    def deliverable(self) -> float:
        """Never negative: a pool whose deductions exceed its size delivers nothing."""
        return max(
            0.0,
            self.physical - self.failover_reserve - self.maintenance - self.safety - self.fragmentation,
        )

    def terms(self) -> list[tuple[str, float]]:
        """The stacked-bar segments, in formula order, summing to `physical` when not clamped."""
        return [
            ("deliverable", self.deliverable),
            ("failover reserve", self.failover_reserve),
            ("maintenance", self.maintenance),
            ("safety margin", self.safety),
            ("fragmentation", self.fragmentation),
        ]


def deliverable(supply: PoolSupply, *, replicas: int | None = None) -> Deliverable:
    """deliverable = physical − reserve held here − maintenance − safety − fragmentation.

    Percentages are of physical capacity so each term reads independently.
    `replicas` overrides the healthy count (degraded or failure case).
    """
    n = supply.replicas if replicas is None else replicas
    physical = n * supply.cu_per_replica
    return Deliverable(
        physical=physical,
        failover_reserve=supply.reserve_held_cu,
        maintenance=physical * supply.maintenance_pct / 100.0,
        safety=physical * supply.safety_pct / 100.0,
        fragmentation=physical * supply.fragmentation_pct / 100.0,
    )


def deliverable_under_failure(supply: PoolSupply, policy: FailurePolicy) -> Deliverable:
    """What the pool still delivers after the stated failure."""
    lost = replicas_lost(policy, supply.replicas_per_zone)
    return deliverable(supply, replicas=supply.replicas - lost)
