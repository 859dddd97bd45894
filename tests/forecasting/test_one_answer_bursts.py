"""Issue 45: one workload, one answer, on traffic with real bursts inside the minute.

A trace is sent as gateway events to two scopes, one bought at 3× its answer and one at 0.6×, each event
admitted or throttled by the contract's bucket at that scope's CU (written out in the test, sharing no
code with capacity/). Then the calculator on the trace, reconciliation's right-size (10 CU) and grow
(1.5 CU) on what each scope recorded, and the supply gap's peak-to-mean agree within one 0.1 CU step;
every CU named holds on the real trace; the replay at the CU bought gives back the recorded throttled
share. Two traces: the first 15 minutes of the public conversation trace in data/, and a synthetic one
with a 5 s burst at the start of every minute (the shape a minute rollup spread evenly hides).
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from entitlements.services import entitlement_grant
from forecasting.peak_to_mean import peak_to_mean, window
from reconciliation.models import Finding
from reconciliation.services import run_request
from sizing.parsing import run_sizing
from telemetry.fold import fold
from telemetry.ingest import ingest_events
from telemetry.trace_import import trace_import
from tests.capacity.test_planning import independent_share
from tests.factories import grant_kwargs
from tests.reconciliation.conftest import now_hour

W_OUT, R = 4.0, 1000.0  # llama-test
CONV = Path(settings.BASE_DIR) / "data" / "azure_llm_2023_conv.csv"


def conversation(minutes: int = 15) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with CONV.open() as fh:
        rows = list(csv.DictReader(fh))
    t = np.array([datetime.fromisoformat(r["TIMESTAMP"][:26]).timestamp() for r in rows])
    t -= t.min()
    keep = t < minutes * 60
    p = np.array([int(r["ContextTokens"]) for r in rows])[keep]
    o = np.array([int(r["GeneratedTokens"]) for r in rows])[keep]
    return t[keep], p, o


def burst_each_minute(minutes: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per minute: 40 requests inside its first 5 s, 20 more spread over the rest (seeded)."""
    rng = np.random.default_rng(45)
    parts = [np.concatenate([m * 60 + rng.random(40) * 5, m * 60 + 5 + rng.random(20) * 55]) for m in range(minutes)]
    t = np.sort(np.concatenate(parts))
    n = len(t)
    return t, rng.integers(200, 2000, n), rng.integers(20, 400, n)


def trace_csv(t: np.ndarray, p: np.ndarray, o: np.ndarray) -> bytes:
    base = datetime(2023, 11, 16, 18, 0, 0)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for ti, pi, oi in zip(t.tolist(), p.tolist(), o.tolist(), strict=True):
        lines.append(f"{(base + timedelta(seconds=ti)).isoformat(sep=' ', timespec='microseconds')},{pi},{oi}")
    return ("\n".join(lines) + "\n").encode()


def bucket_decisions(t: np.ndarray, c: np.ndarray, cu: float, r: float = R) -> np.ndarray:
    """docs/contract.md §3's bucket, request by request: True where admitted."""
    rate = cu * r
    depth = rate * 60.0
    level, at = depth, float(t[0])
    out = np.zeros(len(t), dtype=bool)
    for i, (ti, ci) in enumerate(zip(t.tolist(), c.tolist(), strict=True)):
        level = min(depth, level + rate * (ti - at))
        at = ti
        if level >= ci:
            level -= ci
            out[i] = True
    return out


def send(ent, tenant: str, hour: datetime, t: np.ndarray, p: np.ndarray, o: np.ndarray) -> float:
    """The trace as the gateway reports it for one scope; returns the recorded throttled share."""
    cost = p + W_OUT * o
    admitted = bucket_decisions(t, cost, float(ent.cu), float(ent.model.r_wt_per_s))
    events = []
    for i, (ti, ok) in enumerate(zip(t.tolist(), admitted.tolist(), strict=True)):
        ts = (hour + timedelta(seconds=ti)).isoformat()
        common = {"tenant": tenant, "model": "llama-test", "region": ent.region.slug, "traffic_class": "reserved",
                  "entitlement": str(ent.uuid), "estimated_wt": float(cost[i]), "prompt_tokens": int(p[i])}  # fmt: skip
        if ok:
            events.append({**common, "event_id": f"{tenant}-a{i}", "ts": ts, "decision": "admit"})
            events.append({**common, "event_id": f"{tenant}-c{i}", "ts": ts, "decision": "complete",
                           "actual_wt": float(cost[i]), "output_tokens": int(o[i])})  # fmt: skip
        else:
            events.append({**common, "event_id": f"{tenant}-t{i}", "ts": ts, "decision": "throttle",
                           "reason": "QUOTA_EXCEEDED"})  # fmt: skip
    for k in range(0, len(events), 5000):
        result = ingest_events(source="gateway", events=events[k : k + 5000])
        assert not result.errors, result.errors[:3]
    fold()
    return float(1 - admitted.mean())


@pytest.mark.parametrize("make", [conversation, burst_each_minute], ids=["conversation", "burst-5s"])
def test_one_bursty_trace_one_answer_everywhere(make, fleet, people, django_capture_on_commit_callbacks):
    t, p, o = make()
    cost = (p + W_OUT * o).astype(np.float64)
    acc = fleet.pool_a.accelerator
    acc.cloud_on_demand_per_hour = 2.0
    acc.save()

    # 1. The calculator on the trace at its own timing.
    trace = trace_import(data=trace_csv(t, p, o), name="bursty", tenant=fleet.acme)
    body = {
        "model": "llama-test",
        "prompt_tokens": {"trace": str(trace.pk)},
        "output_tokens": {"trace": str(trace.pk)},
        "slo": {"ttft_p99_s": 2, "tpot_p99_s": 0.2},
    }
    _, result = run_sizing(body, people["member"])
    calc = result.planning.cu_to_buy
    assert independent_share(t, cost, calc) <= 0.001 < independent_share(t, cost, round(calc - 0.1, 1))

    # One scope bought well above the answer, one well below it, both sent the trace.
    big, small = (
        entitlement_grant(
            actor=fleet.operator,
            reason="test",
            **grant_kwargs(fleet.pool_a, tenant, Decimal(cu), start=now_hour() - timedelta(days=20), days=60),
        )
        for tenant, cu in ((fleet.acme, str(round(calc * 3, 1))), (fleet.globex, str(round(calc * 0.6, 1))))
    )
    hour = now_hour() - timedelta(hours=3)
    recorded = {big.pk: send(big, "acme", hour, t, p, o), small.pk: send(small, "globex", hour, t, p, o)}

    # 2. Reconciliation on what each scope recorded: right-size the 10 CU one, grow the 1.5 CU one.
    with django_capture_on_commit_callbacks(execute=True):
        run_request()
    down = Finding.objects.get(entitlement=big, kind="right_size_down", state="open")
    up = Finding.objects.get(entitlement=small, kind="grow", state="open")
    for finding, ent in ((down, big), (up, small)):
        cu = finding.recommended["cu"]
        assert abs(cu - calc) <= 0.1 + 1e-9, (finding.kind, cu, calc)
        assert independent_share(t, cost, cu) <= 0.001  # holds on the real trace
        e = finding.evidence
        # The replay at the CU bought gives back what the scope recorded.
        assert e["replay_at_current"]["throttled_share"] == pytest.approx(recorded[ent.pk], abs=0.001)
        assert e["check_holds"] is True and "raw admission events" in e["planning_basis"]
        assert e["recorded_throttled_share"] == pytest.approx(recorded[ent.pk], abs=1e-12)
    assert recorded[small.pk] > 0.001  # the small scope was throttled over its target

    # 3. The supply gap's peak-to-mean replays the same recorded requests.
    start, end = window()
    ptm = peak_to_mean(big, start, end)
    assert ptm is not None and abs(ptm.cu_to_buy - calc) <= 0.1 + 1e-9
