"""Past demand for the demo fleet, so forecasts, backtests and cost have history on a fresh machine.

Each active entitlement gets `days` (default 56: eight weeks, enough for three one-week backtest
origins with two weekly seasons before the first) of traffic: a daily and weekly shape around a
per-entitlement mean utilisation, a slow trend on every other entitlement, and seeded noise.

Requests and tokens agree with the envelope: every hour's sample carries n requests (summed over
six 10-minute steps) of the envelope's mean shape (the mean of a lognormal through its p50 and
p95, for prompt and output), so weighted tokens per request is the envelope's mean weighted
tokens, whatever the level. Samples go into the hour and day rollups only (an hour's sample in a
minute chart would read as a 60× spike). No raw events are stored: this is rollup history.
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
from telemetry.columns import rows_to_columns
from telemetry.histogram import N_BINS, bin_of
from telemetry.models import MIN_REV_BASE, ROLLUP_ADDITIVE, ROLLUP_VALUES, HourRollup
from telemetry.rollups import add_deltas, minute_deltas

STEP = timedelta(minutes=10)
HOUR = timedelta(hours=1)
Z95 = 1.6449  # standard normal 95th percentile
# Counters that count requests (one per sample row as written) and must count n per sample.
_PER_REQUEST = [
    i for i, c in enumerate(ROLLUP_ADDITIVE) if c in ("requests", "slo_total") or c[:5] in ("ttft_", "e2e_b")
]
_SLO_MET = ROLLUP_ADDITIVE.index("slo_met")
_PLEN, _OLEN = ROLLUP_VALUES.index("plen_b00"), ROLLUP_VALUES.index("olen_b00")
_PMAX, _OMAX = ROLLUP_VALUES.index("prompt_max"), ROLLUP_VALUES.index("output_max")
_PMIN, _OMIN = ROLLUP_VALUES.index("prompt_min_rev"), ROLLUP_VALUES.index("output_min_rev")
# every sample request is of the envelope's mean shape: inside it, so its misses are the platform's
_IN_MET, _IN_MISSED = ROLLUP_ADDITIVE.index("slo_inside_met"), ROLLUP_ADDITIVE.index("slo_inside_missed")
# Quieter than the rest (their use × this), so reconciliation finds something to right-size (issue 17.2).
QUIET = {("umbrella", "llama-3.1-405b-us-east-b200"): 0.45}


def diurnal(hour: float, weekday: int) -> float:
    """1.0 at the afternoon peak, about 0.3 before dawn, weekends at 70 %."""
    day = 0.65 + 0.35 * math.cos((hour - 14.0) / 24.0 * 2 * math.pi)
    return day * (0.7 if weekday >= 5 else 1.0)


def lognormal_mean(p50: float, p95: float) -> float:
    """Mean of the lognormal with this median and 95th percentile: the envelope's mean request."""
    sigma = math.log(max(p95, p50) / p50) / Z95 if p50 > 0 else 0.0
    return p50 * math.exp(sigma**2 / 2)


def envelope_mean(ent: Any) -> tuple[float, float, float]:
    """(prompt, output, weighted tokens) of the envelope's mean request; nothing cached."""
    prompt = lognormal_mean(ent.prompt_p50, ent.prompt_p95)
    output = lognormal_mean(ent.output_p50, ent.output_p95)
    return prompt, output, prompt + ent.model.w_out * output


def _scale(
    deltas: dict[Any, list], n: dict[Any, int], slo_share: dict[Any, float], lengths: tuple[float, float]
) -> dict[Any, list]:
    """Each sample row stands for n requests: its counters count n, its token sums already do. Its
    length histograms and maxima are those of n requests of the envelope's mean lengths, not of one
    request as long as all of them together."""
    prompt, output = lengths
    for key, vals in deltas.items():
        k = (key[0], key[7])  # (minute, decision): one sample row per key within one entitlement
        for i in _PER_REQUEST:
            vals[i] *= n[k]
        if key[7] == "complete":
            vals[_SLO_MET] = vals[_IN_MET] = round(n[k] * slo_share[k])
            vals[_IN_MISSED] = n[k] - vals[_IN_MET]
        out = output if key[7] == "complete" else 0.0
        vals[_PLEN : _PLEN + 2 * N_BINS] = [0] * (2 * N_BINS)
        vals[_PLEN + bin_of(prompt)] = n[k]
        vals[_OLEN + bin_of(out)] = n[k]
        vals[_PMAX], vals[_OMAX] = round(prompt), round(out)
        vals[_PMIN], vals[_OMIN] = MIN_REV_BASE - round(prompt), MIN_REV_BASE - round(out)
    return deltas


def seed_history(*, days: int = 56, seed: int = 11, now: datetime | None = None) -> int:
    """Write `days` of history ending at the last full hour; returns requests written.

    Does nothing when any rollup older than the current hour already exists.
    """
    end = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    if HourRollup.objects.filter(bucket__lt=end - timedelta(hours=1)).exists():
        return 0
    rng = np.random.default_rng(seed)
    ents = list(
        active_at(Entitlement.objects.all(), end).select_related("tenant", "project", "model", "region", "pool")
    )
    hours = int((end - start) / HOUR)
    written = 0
    for k, ent in enumerate(ents):
        rate = float(ent.cu) * ent.model.r_wt_per_s
        level = rng.uniform(0.35, 0.6)  # the entitlement's mean utilisation at the weekday peak
        level *= QUIET.get((ent.tenant.slug, ent.pool.slug if ent.pool_id else ""), 1.0)
        # A slow trend on every other entitlement: up to +3 % of its level a week, ending ≤ 0.75 at peak.
        trend = rng.uniform(0.01, 0.03) if k % 2 else 0.0
        prompt, output, wt_per_request = envelope_mean(ent)
        rows: list[dict[str, Any]] = []
        n: dict[Any, int] = {}
        slo: dict[Any, float] = {}
        for h in range(hours):
            hour = start + h * HOUR
            # Ten-minute steps inside the hour, summed into one sample row per hour: only hour and
            # day rollups are written, and six rows an hour cost six times the work for nothing.
            requests = 0
            for ts in (hour + j * STEP for j in range(int(HOUR / STEP))):
                growth = 1.0 + trend * (ts - end) / timedelta(weeks=1)
                shape = diurnal(ts.hour + ts.minute / 60, ts.weekday())
                util = min(level * growth * shape * rng.lognormal(0, 0.08), 1.0)
                requests += max(1, round(rate * util * STEP.total_seconds() / wt_per_request))
            n[(hour, "admit")] = n[(hour, "complete")] = requests
            # Every sample request is inside its envelope, so any miss would be the platform's and put every
            # pool in review: the demo's platform debt is the PLATFORM scope's throttles (demo.findings) alone.
            # The old draw is still taken, so every figure drawn after it stays what it was.
            rng.uniform(0.97, 1.0)
            slo[(hour, "complete")] = 1.0
            base = {
                "ts": hour, "tenant": ent.tenant.slug, "project": ent.project.slug if ent.project else "",
                "model": ent.model.slug, "region": ent.region.slug, "traffic_class": ent.traffic_class_id,
                "entitlement": ent.uuid, "reason": "", "cached_prompt_tokens": 0,
            }  # fmt: skip
            rows.append({**base, "decision": "admit", "estimated_wt": requests * wt_per_request, "actual_wt": None,
                         "prompt_tokens": round(requests * prompt), "output_tokens": 0,
                         "slo_met": None, "ttft_ms": None, "e2e_ms": None})  # fmt: skip
            rows.append({**base, "ts": hour + timedelta(seconds=30), "decision": "complete", "estimated_wt": 0.0,
                         "actual_wt": requests * wt_per_request, "prompt_tokens": round(requests * prompt),
                         "output_tokens": round(requests * output), "slo_met": True,
                         "ttft_ms": float(rng.uniform(150, 900)), "e2e_ms": float(rng.uniform(4000, 15000))})  # fmt: skip
        with transaction.atomic():
            add_deltas(_scale(minute_deltas(rows_to_columns(rows)), n, slo, (prompt, output)), with_minutes=False)
        written += sum(v for (_, d), v in n.items() if d == "admit")
    return written
