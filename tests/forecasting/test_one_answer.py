"""Issue 30.2: one workload, one answer. One trace goes through the calculator (its own timing), into
an entitlement's minute rollups (as the gateway would record it) for reconciliation's right-size,
and into the supply gap's demand (each entitlement at its own peak-to-mean from those rollups): all
three answer the same CU, and an independent replay of the trace holds it.

The trace's requests sit evenly inside each minute at one cost per minute, the very shape a minute
rollup keeps (count and sum), so the recorded workload is the trace itself, shifted in time.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest

from entitlements.services import entitlement_grant
from forecasting import gap
from forecasting.models import ForecastRun, PoolDemand
from reconciliation.models import Finding
from reconciliation.services import run_request
from sizing.parsing import run_sizing
from telemetry.rollups import rollups_add
from telemetry.trace_import import trace_import
from tests.capacity.test_planning import independent_share
from tests.factories import grant_kwargs
from tests.reconciliation.conftest import now_hour, row

PROMPT, OUTPUT, W_OUT, R = 300, 100, 4.0, 1000.0
COST = PROMPT + W_OUT * OUTPUT  # 700 wt
PER_MINUTE = [60] * 60
PER_MINUTE[30] = 600  # a busy minute, 10× the others: 4,140 requests, the minute 4.7× the hour's mean


def offsets() -> np.ndarray:
    """Seconds from the hour: minute m's c requests at m·60 + (j + ½)·60 / c."""
    return np.concatenate([m * 60 + (np.arange(c) + 0.5) * 60 / c for m, c in enumerate(PER_MINUTE)])


def trace_csv() -> bytes:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t in offsets():
        whole = int(t)
        ticks = round((t - whole) * 10_000_000)
        m, s = divmod(whole, 60)
        lines.append(f"2023-11-16 18:{m:02d}:{s:02d}.{ticks:07d},{PROMPT},{OUTPUT}")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def recorded(fleet, people):
    """The trace, and an entitlement of 20 CU whose last-but-two hour recorded exactly its requests."""
    acc = fleet.pool_a.accelerator
    acc.cloud_on_demand_per_hour = 2.0  # the calculator prices its answer
    acc.save()
    ent = entitlement_grant(
        actor=fleet.operator,
        reason="test",
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("20"), start=now_hour() - timedelta(days=20), days=60),
    )
    hour = now_hour() - timedelta(hours=3)
    rows = []
    for t in offsets():
        ts = hour + timedelta(seconds=float(t))
        rows.append(row(ent, ts, "admit", estimated_wt=COST))
        rows.append(row(ent, ts, "complete", estimated_wt=COST, actual_wt=COST, prompt_tokens=PROMPT,
                        output_tokens=OUTPUT))  # fmt: skip
    rollups_add(rows, with_minutes=True)
    trace = trace_import(data=trace_csv(), name="one-answer", tenant=fleet.acme)
    return ent, trace


def test_one_trace_one_answer_in_the_calculator_reconciliation_and_the_supply_gap(
    recorded, people, django_capture_on_commit_callbacks
):
    ent, trace = recorded
    t, cost = offsets(), np.full(sum(PER_MINUTE), float(COST))

    # 1. The calculator: the trace at its own timing.
    body = {
        "model": "llama-test",
        "prompt_tokens": {"trace": str(trace.pk)},
        "output_tokens": {"trace": str(trace.pk)},
        "slo": {"ttft_p99_s": 2, "tpot_p99_s": 0.2},
    }
    _, result = run_sizing(body, people["member"])
    calculator = result.planning.cu_to_buy
    assert independent_share(t, cost, calculator) <= 0.001 < independent_share(t, cost, round(calculator - 0.1, 1))
    # The busy minute needs more than the hour's mean (0.805 CU), less than its own 7 CU peak.
    assert 0.805 < calculator < 7.0

    # 2. Reconciliation's right-size, replaying the entitlement's recorded minutes.
    with django_capture_on_commit_callbacks(execute=True):
        run_request()
    finding = Finding.objects.get(entitlement=ent, kind="right_size_down", state="open")
    assert finding.recommended["cu"] == calculator
    assert finding.evidence["cu_to_buy"] == calculator
    assert finding.evidence["replay"]["requests"] == sum(PER_MINUTE)

    # 3. The supply gap: a forecast of the recorded hourly mean, at the entitlement's own peak-to-mean.
    busiest_hour_cu = sum(PER_MINUTE) * COST / 3600 / R
    run = ForecastRun.objects.create(status="succeeded", progress=100)
    PoolDemand.objects.create(
        run=run,
        pool=fleet_pool(ent),
        start=now_hour(),
        tenants={"acme": 1.0},
        hourly={k: [busiest_hour_cu] * (26 * 168) for k in gap.FORECAST_SCENARIOS},
    )
    _, pools = gap.supply_gap(run=run)
    p = pools[0]
    assert p["weeks"][0]["expected_cu"] == pytest.approx(calculator, abs=0.0005)
    (measured,) = p["peak_to_mean"]["entitlements"]
    assert measured["cu_to_buy"] == calculator
    assert measured["busiest_hour_cu"] == pytest.approx(busiest_hour_cu, rel=1e-12)


def fleet_pool(ent):
    return ent.pool


def test_without_minute_rollups_the_gap_keeps_the_hourly_mean(fleet):
    run = ForecastRun.objects.create(status="succeeded", progress=100)
    PoolDemand.objects.create(
        run=run,
        pool=fleet.pool_a,
        start=now_hour(),
        tenants={"acme": 1.0},
        hourly={k: [12.5] * (26 * 168) for k in gap.FORECAST_SCENARIOS},
    )
    p = gap.supply_gap(run=run)[1][0]
    assert p["peak_to_mean"]["factor"] == 1.0
    assert p["weeks"][0]["expected_cu"] == 12.5
