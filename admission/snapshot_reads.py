"""The snapshot's database reads, one per part, as plain rows (no model instances).

Entitlements are summed by the database (admission.scope_sums); the casts below keep 10,000s of
values as plain floats and strings. Pools are few; they go through the model for the deliverable
formula (capacity.deliverable via Pool.breakdown), which must stay the one formula.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db.models import FloatField, Func
from django.db.models.functions import Cast

from entitlements.models import Pool
from entitlements.models.supply import as_cu
from telemetry.selectors import latest_pool_health, supply_alerts_down


class Epoch(Func):
    """A timestamp as float seconds since 1970, computed by the database: 10,000 rows of parsed
    timezone-aware datetimes cost more than the rest of a rebuild together."""

    output_field = FloatField()
    # Both databases hand back a float (or NULL): no per-value converter on 10,000 rows.
    convert_value = staticmethod(Func._convert_value_noop)  # type: ignore[attr-defined]  # private in Django

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)::float8", **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Stored as UTC text; julianday() parses it (to within tens of microseconds).
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)", **extra
        )


class FloatCast(Cast):
    convert_value = staticmethod(Cast._convert_value_noop)  # type: ignore[attr-defined]


class TextCast(Cast):
    convert_value = staticmethod(Cast._convert_value_noop)  # type: ignore[attr-defined]


class PoolBase(NamedTuple):
    pool_id: int
    slug: str
    model: str
    region: str
    r_wt_per_s: float
    deliverable_cu: float


def pool_rows() -> list[PoolBase]:
    pools = Pool.objects.select_related("model", "region", "operating_point__model").prefetch_related("zones")
    return [
        PoolBase(p.pk, p.slug, p.model.slug, p.region.slug, p.model.r_wt_per_s, float(as_cu(p.breakdown().deliverable)))
        for p in pools
    ]


def health_rows(pool_ids: list[int]) -> dict[int, tuple[int, int] | None]:
    """Operator override, else the newest fleet sample from telemetry, else None (healthy)."""
    from admission.models import PoolHealthOverride

    overrides = {
        o["pool_id"]: (o["replicas_healthy"], o["replicas_total"])
        for o in PoolHealthOverride.objects.values("pool_id", "replicas_healthy", "replicas_total")
    }
    return {pid: pool_health(pid, overrides) for pid in pool_ids}


def pool_health(pool_id: int, overrides: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """The override, else the newest fleet sample less the replicas firing supply alerts take out
    (telemetry.selectors.supply_alerts_down; out of the pool's own replica count when no sample
    reports one). min(), not a sum: a sample taken after the replica went down already counts it."""
    if pool_id in overrides:
        return overrides[pool_id]
    got = latest_pool_health(pool_id)
    down = supply_alerts_down(pool_id)
    if not down:
        return (int(got[0]), int(got[1])) if got else None
    if got is None:
        replicas = Pool.objects.get(pk=pool_id).replicas
        got = (replicas, replicas)
    healthy, total = int(got[0]), int(got[1])
    return max(0, min(healthy, total - down)), total
