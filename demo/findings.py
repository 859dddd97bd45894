"""What the demo's history holds besides plain demand, so reconciliation (issue 17.2) finds one of each
kind on first start: a tenant throttled for quota (grow), prompts longer than the envelope promised
(envelope drift), platform-caused throttles in a few hours (platform owes). Right-size down comes from
demo.history.QUIET. Written over the reconciliation window, on top of seed_history's rows, once."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from demo.history import HOUR, _scale, envelope_mean
from entitlements.models import Entitlement
from telemetry import usage
from telemetry.columns import rows_to_columns
from telemetry.models import ROLLUP_ADDITIVE, ROLLUP_KEY, ROLLUP_MAX, MinuteRollup
from telemetry.rollups import add_deltas, minute_deltas
from telemetry.sql import upsert_add

GROW = ("acme", "llama-2-70b-us-east-h200")  # a burst minute each busy hour: 3 % of its arrivals refused QUOTA_EXCEEDED
DRIFT = ("acme", "llama-3.1-8b-us-east-h100")  # a third more requests, prompts 1.8 × the promised p95
PLATFORM = ("globex", "llama-2-70b-eu-west-h100")  # PLATFORM_CAPACITY throttles in three hours
PLATFORM_HOURS = {30: 5, 31: 12, 200: 3}  # hours into the window → throttles


def _ent(tenant: str, pool: str) -> Entitlement | None:
    return (
        Entitlement.objects.filter(tenant__slug=tenant, pool__slug=pool, revoked_at__isnull=True)
        .exclude(traffic_class_id="best_effort")  # type: ignore[misc]  # keyed by slug (to_field); the stubs assume an int id
        .select_related("tenant", "project", "model", "region", "pool")
        .first()
    )


def _admits_per_hour(ent: Entitlement, start: datetime, end: datetime) -> dict[datetime, int]:
    """Admits per hour named on the entitlement itself (the demo writes them so: no unattributed rows)."""
    rows = usage.sums("hour", usage.own(ent), start, end, by=("bucket",), fields=("n",), decision="admit")
    return {r["bucket"]: int(r["n"]) for r in rows}


def _write(ent: Entitlement, rows: list[dict[str, Any]], n: dict[Any, int], lengths: tuple[float, float]) -> None:
    if not rows:
        return
    slo = dict.fromkeys(n, 1.0)
    with transaction.atomic():
        add_deltas(_scale(minute_deltas(rows_to_columns(rows)), n, slo, lengths), with_minutes=False)


def _row(ent: Entitlement, ts: datetime, decision: str, **kw: Any) -> dict[str, Any]:
    base = {
        "ts": ts, "tenant": ent.tenant.slug, "project": ent.project.slug if ent.project else "",
        "model": ent.model.slug, "region": ent.region.slug, "traffic_class": ent.traffic_class_id,
        "entitlement": ent.uuid, "reason": "", "cached_prompt_tokens": 0, "estimated_wt": 0.0,
        "actual_wt": None, "prompt_tokens": 0, "output_tokens": 0, "slo_met": None, "ttft_ms": None, "e2e_ms": None,
    }  # fmt: skip
    return base | {"decision": decision} | kw


BURST_MINUTE = 40


def _seed_grow(ent: Entitlement, start: datetime, end: datetime) -> None:
    """Throttles the bucket itself would have made. Reconciliation replays a scope's recorded minutes
    through its bucket (docs/planning.md), so a demo that only wrote "3 % refused" into the hour
    rollups, spread evenly over the hour, would fit the CU bought and say grow for no reason. Here each
    busy hour's admits are laid out minute by minute with one burst minute that asks the full bucket
    (60 s deep) plus the minute's refill, and the refused 3 % on top of it: the minutes the replay reads.
    The admits already sit in the hour rollups (seed_history), so they are written to the minutes alone;
    the throttles are new and go to every level."""
    prompt, _, wt = envelope_mean(ent)
    per_minute = float(ent.cu) * float(ent.model.r_wt_per_s) * 60
    burst = math.ceil(2 * per_minute / wt)
    admits_rows: list[dict[str, Any]] = []
    admits_n: dict[Any, int] = {}
    throttle_rows: list[dict[str, Any]] = []
    throttle_n: dict[Any, int] = {}
    for hour, admits in _admits_per_hour(ent, start, end).items():
        if admits < 3 * burst:
            continue  # too quiet an hour to hold a burst beside its other minutes
        base, extra = divmod(admits - burst, 59)
        others = (m for m in range(60) if m != BURST_MINUTE)
        counts = {BURST_MINUTE: burst} | {m: base + (i < extra) for i, m in enumerate(others)}
        for m, c in counts.items():
            if c:
                ts = hour + timedelta(minutes=m)
                admits_n[(ts, "admit")] = c
                admits_rows.append(_row(ent, ts, "admit", estimated_wt=c * wt, prompt_tokens=round(c * prompt)))
        ts = hour + timedelta(minutes=BURST_MINUTE)
        throttle_n[(ts, "throttle")] = k = max(1, round(admits * 0.03))
        throttle_rows.append(_row(ent, ts, "throttle", reason="QUOTA_EXCEEDED", estimated_wt=k * wt,
                                  prompt_tokens=round(k * prompt)))  # fmt: skip
    if admits_rows:
        deltas = _scale(
            minute_deltas(rows_to_columns(admits_rows)), admits_n, dict.fromkeys(admits_n, 1.0), (prompt, 0.0)
        )
        with transaction.atomic():
            upsert_add(
                MinuteRollup, ROLLUP_KEY, ROLLUP_ADDITIVE, [[*k, *deltas[k]] for k in sorted(deltas)], ROLLUP_MAX
            )
    _write(ent, throttle_rows, throttle_n, (prompt, 0.0))


def seed_findings(end: datetime) -> int:
    """Rows over [end − RECONCILE_WINDOW_DAYS, end); returns the entitlements touched."""
    start = end - timedelta(days=settings.RECONCILE_WINDOW_DAYS)
    touched = 0
    ent = _ent(*GROW)
    if ent is not None:
        _seed_grow(ent, start, end)
        touched += 1
    ent = _ent(*DRIFT)
    if ent is not None:
        _, output, _ = envelope_mean(ent)
        prompt = float(min(ent.max_prompt_tokens, round(1.8 * ent.prompt_p95)))
        wt = prompt + ent.model.w_out * output
        rows, n = [], {}
        for hour, admits in _admits_per_hour(ent, start, end).items():
            ts = hour + timedelta(minutes=40)
            k = max(1, round(admits / 3))
            n[(ts, "admit")] = n[(ts, "complete")] = k
            rows.append(_row(ent, ts, "admit", estimated_wt=k * wt, prompt_tokens=round(k * prompt)))
            rows.append(_row(ent, ts + timedelta(seconds=30), "complete", actual_wt=k * wt,
                             output_tokens=round(k * output), slo_met=True, ttft_ms=400.0, e2e_ms=8000.0))  # fmt: skip
        _write(ent, rows, n, (prompt, output))
        touched += 1
    ent = _ent(*PLATFORM)
    if ent is not None:
        prompt, _, wt = envelope_mean(ent)
        rows, n = [], {}
        for h, k in PLATFORM_HOURS.items():
            ts = start + h * HOUR + timedelta(minutes=20)
            n[(ts, "throttle")] = k
            rows.append(_row(ent, ts, "throttle", reason="PLATFORM_CAPACITY", estimated_wt=k * wt,
                             prompt_tokens=round(k * prompt)))  # fmt: skip
        _write(ent, rows, n, (prompt, 0.0))
        touched += 1
    return touched
