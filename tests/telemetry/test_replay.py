"""Done-when: 100k events replayed 3 times, shuffled and split into batches → exact totals, none lost or doubled."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import Sum

from telemetry.models import AdmissionEvent, DayRollup, HourRollup, MinuteRollup
from telemetry.services import ingest_events
from tests.telemetry.helpers import T0

N = 100_000
REASONS = ["QUOTA_EXCEEDED", "PLATFORM_CAPACITY", "RECLAIMED", "CONCURRENCY_LIMIT"]


def _events(rng: random.Random) -> list[dict]:
    out = []
    for i in range(N):
        decision = rng.choice(["admit", "admit", "throttle", "complete"])
        e = {
            "event_id": f"req-{i}" + (":complete" if decision == "complete" else ""),
            # two days and a bit: crosses hours and a day boundary
            "ts": (T0 + timedelta(seconds=rng.randrange(0, 2 * 86400 + 3600))).isoformat(),
            "tenant": rng.choice(["acme", "globex"]),
            "model": "llama-test",
            "region": "us-test",
            "traffic_class": rng.choice(["reserved", "shared", "best_effort"]),
            "decision": decision,
            "estimated_wt": rng.randrange(1, 5000),  # whole numbers: float sums stay exact in any order
            "prompt_tokens": rng.randrange(0, 4000),
        }
        if decision == "throttle":
            e["reason"] = rng.choice(REASONS)
        if decision == "complete":
            e.update(
                actual_wt=rng.randrange(0, 5000),
                output_tokens=rng.randrange(0, 900),
                ttft_ms=rng.randrange(5, 5000),
                e2e_ms=rng.randrange(100, 60000),
                slo_met=rng.random() < 0.9,
            )
        out.append(e)
    return out


def _replay(events: list[dict], rng: random.Random) -> tuple[int, int]:
    stream = events * 3
    rng.shuffle(stream)
    accepted = duplicates = 0
    i = 0
    while i < len(stream):
        size = rng.randrange(500, 20_000)
        r = ingest_events(source="admission", events=stream[i : i + size])
        assert r.errors == []
        accepted += r.accepted
        duplicates += r.duplicates
        i += size
    return accepted, duplicates


def _expected(events: list[dict]) -> dict:
    by = Counter()
    for e in events:
        k = (e["tenant"], e["decision"], e.get("reason", ""))
        by[k + ("n",)] += 1
        by[k + ("est",)] += e["estimated_wt"]
        by[k + ("act",)] += e.get("actual_wt", 0)
        by[k + ("prompt",)] += e["prompt_tokens"]
        by[k + ("out",)] += e.get("output_tokens", 0)
        by[k + ("slo",)] += 1 if e.get("slo_met") else 0
    return dict(by)


def _stored(model) -> dict:
    out = {}
    rows = model.objects.values("tenant", "decision", "reason").annotate(
        n=Sum("requests"),
        est=Sum("estimated_wt"),
        act=Sum("actual_wt"),
        prompt=Sum("prompt_tokens"),
        out=Sum("output_tokens"),
        slo=Sum("slo_met"),
    )
    for r in rows:
        k = (r["tenant"], r["decision"], r["reason"])
        for f in ("n", "est", "act", "prompt", "out", "slo"):
            if r[f]:
                out[k + (f,)] = r[f]
    return out


def _check(events: list[dict]) -> None:
    rng = random.Random(7)
    accepted, duplicates = _replay(events, rng)
    assert (accepted, duplicates) == (N, 2 * N)
    assert AdmissionEvent.objects.count() == N
    expected = {k: v for k, v in _expected(events).items() if v}
    for model in (MinuteRollup, HourRollup, DayRollup):
        assert _stored(model) == expected, model.__name__
    # every latency sample is in exactly one histogram bin, at every level
    completes = sum(1 for e in events if e["decision"] == "complete")
    for model in (MinuteRollup, HourRollup, DayRollup):
        agg = model.objects.aggregate(**{f"b{i}": Sum(f"ttft_b{i:02d}") for i in range(32)})
        assert sum(v or 0 for v in agg.values()) == completes


@pytest.mark.slow
def test_100k_replayed_three_times_exact_totals(fleet):
    _check(_events(random.Random(42)))


@pytest.mark.slow
@pytest.mark.postgres
def test_100k_replayed_three_times_exact_totals_on_postgres(fleet):
    _check(_events(random.Random(43)))
