"""What a reconciliation run reads for one entitlement over its window: the statement's figures plus
hour by hour use, demand, borrowing and platform-caused throttles, all from the rollups.

Hourly, not per minute: the window is two weeks and minute rollups are kept 35 days (and history
seeded or backfilled lives in hour rollups only), so "p95 use" here is the p95 over the window's hours
of settled use ÷ what was bought in that hour, idle hours counted as 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from capacity.planning import Workload
from entitlements.bought import bought_steps, cu_at, seconds_bought
from entitlements.models import Entitlement
from entitlements.reasons import REASONS
from forecasting.peak_to_mean import TENANT_GROW_REASONS, recorded_workload
from telemetry.statement import statement
from telemetry.usage import scope, step_of, sums

HOUR = timedelta(hours=1)

PLATFORM_REASONS = frozenset(code for code, r in REASONS.items() if r.responsible == "platform")


@dataclass
class Figures:
    ent: Entitlement
    start: datetime
    end: datetime
    statement: dict[str, Any]
    bought_all_window: bool  # something was bought in every hour of the window
    hours: int
    use_share: list[float] = field(default_factory=list)  # per hour: settled CU ÷ bought CU
    use_cu: list[float] = field(default_factory=list)  # per hour: settled CU
    demand_cu: list[float] = field(default_factory=list)  # per hour: settled + tenant-throttled CU
    served_per_hour: list[int] = field(default_factory=list)
    borrow_days: int = 0
    days: int = 0
    platform_throttle_hours: dict[str, int] = field(default_factory=dict)
    refused_prompt_max: int = 0  # the longest prompt refused OUTSIDE_ENVELOPE
    refused_output_max: int = 0
    # The window's recorded reservations as a replayable workload (docs/planning.md).
    history: Workload | None = None


def p95(values: list[float]) -> float:
    """Nearest rank."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[math.ceil(0.95 * len(s)) - 1]


def read(ent: Entitlement, start: datetime, end: datetime) -> Figures:
    r_wt = ent.model.r_wt_per_s or 1.0
    steps = bought_steps(ent, start, end)
    bought_s = seconds_bought(steps)
    n = int((end - start) / HOUR)
    f = Figures(ent, start, end, statement(ent, start, end), bought_s >= (end - start).total_seconds(), n)
    settled = [0.0] * n
    throttled = [0.0] * n
    served = [0] * n
    rows = sums(
        "hour",
        scope(ent),
        start,
        end,
        by=("bucket", "decision", "reason"),
        fields=("n", "est", "act"),
        maxima=("prompt_max",),
    )
    for row in rows:
        b = row["bucket"]
        i = step_of(b, start, 3600)
        if not 0 <= i < n:
            continue
        if row["decision"] == "complete":
            settled[i] += float(row["act"] or 0)
            served[i] += int(row["n"] or 0)
        elif row["reason"] in TENANT_GROW_REASONS:
            throttled[i] += float(row["est"] or 0)
        elif row["reason"] in PLATFORM_REASONS:
            key = b.replace(minute=0, second=0, microsecond=0).isoformat()
            f.platform_throttle_hours[key] = f.platform_throttle_hours.get(key, 0) + int(row["n"] or 0)
        if row["reason"] == "OUTSIDE_ENVELOPE":
            f.refused_prompt_max = max(f.refused_prompt_max, int(row["prompt_max"] or 0))
    borrowed_days: set[int] = set()
    for i in range(n):
        t = start + i * HOUR
        cu = float(cu_at(steps, t))
        use = settled[i] / 3600 / r_wt
        f.use_cu.append(use)
        f.demand_cu.append((settled[i] + throttled[i]) / 3600 / r_wt)
        f.use_share.append(use / cu if cu > 0 else 0.0)
        f.served_per_hour.append(served[i])
        if use > cu:
            borrowed_days.add(i // 24)
    f.borrow_days, f.days = len(borrowed_days), max(1, n // 24)
    f.history = history(ent, start, end)
    return f


def history(ent: Entitlement, start: datetime, end: datetime) -> Workload:
    """What the scope asked for in the window (forecasting.peak_to_mean.recorded_workload: the supply
    gap's peak-to-mean replays the same workload)."""
    return recorded_workload(ent, start, end)
