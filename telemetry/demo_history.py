"""Past demand for the demo fleet, so forecasts, backtests and cost have history on a fresh machine.

Each active entitlement gets `days` of traffic: a diurnal and weekly shape around a per-entitlement
mean utilisation, with seeded noise. Every 10 minutes one admitted sample and its completion are
added to the hour and day rollups (not the minute ones, where a 10-minute sample would read as a
spike); each sample stands for the 10 minutes' worth of weighted tokens, so token and rate series
are to scale while request counts are sampled (6 per hour). No raw events are stored: this is rollup history, and it is labelled as demo data
by its source in the admin (`demo-history`).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from entitlements.models import Entitlement
from entitlements.selectors import active_at
from telemetry.models import HourRollup
from telemetry.rollups import rollups_add

STEP = timedelta(minutes=10)


def diurnal(hour: float, weekday: int) -> float:
    """1.0 at the afternoon peak, about 0.3 before dawn, weekends at 70 %."""
    day = 0.65 + 0.35 * math.cos((hour - 14.0) / 24.0 * 2 * math.pi)
    return day * (0.7 if weekday >= 5 else 1.0)


def seed_history(*, days: int = 14, seed: int = 11, now: datetime | None = None) -> int:
    """Write `days` of hourly-shaped history ending at the last full hour; returns samples written.

    Does nothing when any rollup older than the current day already exists.
    """
    end = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    if HourRollup.objects.filter(bucket__lt=end - timedelta(hours=1)).exists():
        return 0
    rng = np.random.default_rng(seed)
    ents = list(active_at(Entitlement.objects.all(), end).select_related("tenant", "project", "model", "region"))
    steps = int((end - start) / STEP)
    written = 0
    for ent in ents:
        rate = float(ent.cu) * ent.model.r_wt_per_s
        level = rng.uniform(0.35, 0.75)  # the entitlement's mean utilisation at peak
        wt_per_request = ent.prompt_p50 + ent.model.w_out * ent.output_p50
        rows: list[dict[str, Any]] = []
        for i in range(steps):
            ts = start + i * STEP
            util = level * diurnal(ts.hour + ts.minute / 60, ts.weekday()) * rng.lognormal(0, 0.08)
            wt = rate * util * STEP.total_seconds()
            requests = wt / wt_per_request
            base = {
                "ts": ts, "tenant": ent.tenant.slug, "project": ent.project.slug if ent.project else "",
                "model": ent.model.slug, "region": ent.region.slug, "traffic_class": ent.traffic_class_id,
                "entitlement": ent.uuid, "reason": "", "cached_prompt_tokens": 0,
            }  # fmt: skip
            rows.append({**base, "decision": "admit", "estimated_wt": wt, "actual_wt": None,
                         "prompt_tokens": round(requests * ent.prompt_p50), "output_tokens": 0,
                         "slo_met": None, "ttft_ms": None, "e2e_ms": None})  # fmt: skip
            rows.append({**base, "ts": ts + timedelta(seconds=30), "decision": "complete", "estimated_wt": 0.0,
                         "actual_wt": wt * 0.93, "prompt_tokens": 0,
                         "output_tokens": round(requests * ent.output_p50 * 0.93),
                         "slo_met": bool(rng.random() < 0.985), "ttft_ms": float(rng.uniform(150, 900)),
                         "e2e_ms": float(rng.uniform(4000, 15000))})  # fmt: skip
        with transaction.atomic():
            # hour and day rollups only: a sample per 10 minutes is to scale per hour, but would
            # read as a 10× spike in a minute-level chart
            rollups_add(rows, with_minutes=False)
        written += len(rows)
    return written
