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

from django.db.models import Max, Sum

from capacity.planning import Workload
from capacity.planning_workload import bucket_workload
from entitlements.models import Entitlement
from entitlements.reasons import REASONS
from telemetry.models import HourRollup, MinuteRollup
from telemetry.statement import _cu_at, _scope, bought_steps, statement

HOUR = timedelta(hours=1)
TENANT_GROW_REASONS = frozenset({"QUOTA_EXCEEDED", "CONCURRENCY_LIMIT", "BUDGET_EXHAUSTED"})
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
    bought_s = sum((s.end - s.start).total_seconds() for s in steps)
    n = int((end - start) / HOUR)
    f = Figures(ent, start, end, statement(ent, start, end), bought_s >= (end - start).total_seconds(), n)
    settled = [0.0] * n
    throttled = [0.0] * n
    served = [0] * n
    rows = (
        HourRollup.objects.filter(_scope(ent), bucket__gte=start, bucket__lt=end)
        .values("bucket", "decision", "reason")
        .annotate(n=Sum("requests"), est=Sum("estimated_wt"), act=Sum("actual_wt"), pmax=Max("prompt_max"))
        .order_by()
    )
    for row in rows:
        b = row["bucket"]
        i = int((b - start) / HOUR)
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
            f.refused_prompt_max = max(f.refused_prompt_max, int(row["pmax"] or 0))
    borrowed_days: set[int] = set()
    for i in range(n):
        t = start + i * HOUR
        cu = float(_cu_at(steps, t))
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
    """What the scope asked for in the window, minute by minute: every reservation admitted or
    throttled for its own quota, concurrency or budget, at its estimate. Minute rollups where they
    are kept; hours (spread over the hour, said so) where only hour rollups hold the history; the
    settled completions where no reservation was recorded at all (an imported history)."""
    asked = {"admit", "throttle"}
    for model, width, what in ((MinuteRollup, 60.0, "minute"), (HourRollup, 3600.0, "hour")):
        rows = list(
            model.objects.filter(_scope(ent), bucket__gte=start, bucket__lt=end)
            .values("bucket", "decision", "reason")
            .annotate(n=Sum("requests"), est=Sum("estimated_wt"), act=Sum("actual_wt"))
            .order_by()
        )
        if not rows:
            continue
        reserved = [r for r in rows if r["decision"] in asked]
        kept = [r for r in reserved if r["decision"] == "admit" or r["reason"] in TENANT_GROW_REASONS]
        basis = f"{ent.tenant.slug}/{ent.model.slug}/{ent.region.slug} {ent.traffic_class_id} ({what} rollups)"
        if not kept:
            kept = [
                {**r, "est": r["act"]}
                for r in rows
                if r["decision"] == "complete" or r["reason"] in TENANT_GROW_REASONS
            ]
            basis += ", settled completions (no reservations recorded)"
        origin = start.timestamp()
        return bucket_workload(
            [r["bucket"].timestamp() - origin for r in kept],
            [int(r["n"] or 0) for r in kept],
            [float(r["est"] or 0) for r in kept],
            width_s=width,
            name=basis,
        )
    return bucket_workload([], [], [], name=f"{ent.tenant.slug}: no recorded traffic")
