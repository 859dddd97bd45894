"""Synthetic hourly telemetry for the forecasting tests: rollup rows written directly."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from telemetry.models import HourRollup

END = datetime.fromisoformat("2026-03-02T00:00:00+00:00")  # a Monday, on the hour


def daily_cu(hours: int, *, base: float, amp: float, noise: float, seed: int) -> np.ndarray:
    """Known daily seasonality: base + amp·sin(2πt/24) + Gaussian noise, never below zero."""
    t = np.arange(hours)
    rng = np.random.default_rng(seed)
    return np.clip(base + amp * np.sin(2 * np.pi * t / 24) + rng.normal(0, noise, hours), 0, None)


def write_demand(
    *, tenant: str, model: str, region: str, cu: np.ndarray, r: float, end: datetime = END, throttled_share: float = 0.0
) -> None:
    """One admit row (and one throttle row) per hour carrying the hour's weighted tokens."""
    start = end - timedelta(hours=len(cu))
    rows = []
    for i, v in enumerate(cu):
        wt = float(v) * r * 3600
        bucket = start + timedelta(hours=i)
        common = {"bucket": bucket, "tenant": tenant, "model": model, "region": region, "traffic_class": "reserved"}
        rows.append(HourRollup(decision="admit", requests=1, estimated_wt=wt * (1 - throttled_share), **common))
        if throttled_share:
            rows.append(
                HourRollup(
                    decision="throttle",
                    reason="QUOTA_EXCEEDED",
                    requests=1,
                    estimated_wt=wt * throttled_share,
                    **common,
                )
            )
    HourRollup.objects.bulk_create(rows, batch_size=2000)


def cycles_cu(hours: int, *, base: float, trend_per_week: float = 0.0, weekend: float = 0.6, seed: int) -> np.ndarray:
    """Known daily and weekly cycles (afternoon peak, weekends at `weekend`), a known linear trend
    (share of `base` per week) and 10 % lognormal noise; hour 0 is a Monday 00:00."""
    t = np.arange(hours)
    rng = np.random.default_rng(seed)
    day = 0.65 + 0.35 * np.cos((t % 24 - 14) / 24 * 2 * np.pi)
    week = np.where((t // 24) % 7 >= 5, weekend, 1.0)
    return base * (1 + trend_per_week * t / 168) * day * week * rng.lognormal(0, 0.1, hours)
