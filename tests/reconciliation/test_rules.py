"""Each recommendation driven from synthetic rollups (issue 17.2), through a real run."""

from __future__ import annotations

from decimal import Decimal

import pytest

from entitlements.models import Accelerator
from reconciliation.models import Finding, PoolReview
from reconciliation.services import run_request
from tests.reconciliation.conftest import every_hour, row

R = 1000.0  # llama-test: wt/s per CU
HOUR_WT_PER_CU = R * 3600


@pytest.fixture
def _run(django_capture_on_commit_callbacks):
    def go():
        with django_capture_on_commit_callbacks(execute=True):
            run = run_request()
        run.refresh_from_db()
        assert run.status == "succeeded", run.error
        return run

    return go


def _kinds(ent):
    return {f.kind: f for f in Finding.objects.filter(entitlement=ent, state="open")}


def _served(ent, ts, wt, **kw):
    return row(ent, ts, "complete", actual_wt=wt, prompt_tokens=kw.pop("prompt", 1000),
               output_tokens=kw.pop("output", 200), **kw)  # fmt: skip


@pytest.mark.django_db
def test_right_size_down_when_p95_use_stays_below_the_threshold(grant, _run):
    ent = grant("2")
    # 20 % of 2 CU every hour: p95 share 0.2 < 0.40; new CU = 0.4 CU ÷ 0.7 = 0.571 → 0.6
    every_hour(ent, lambda i, ts: [_served(ent, ts, 0.2 * 2 * HOUR_WT_PER_CU)])
    _run()
    f = _kinds(ent)
    assert set(f) == {"right_size_down"}
    rs = f["right_size_down"]
    assert rs.evidence["p95_hourly_use_share"] == 0.2
    assert rs.cu_delta == Decimal("-1.400")
    assert rs.recommended["cu"] == 0.6
    assert "Amend to 0.6 CU" in rs.action


@pytest.mark.django_db
def test_no_right_size_at_the_threshold(grant, _run):
    ent = grant("2")
    every_hour(ent, lambda i, ts: [_served(ent, ts, 0.4 * 2 * HOUR_WT_PER_CU)])
    _run()
    assert "right_size_down" not in _kinds(ent)


@pytest.mark.django_db
def test_grow_when_tenant_throttles_pass_one_percent_of_arrivals(grant, _run):
    ent = grant("2")

    def hour(i, ts):
        # admitted and settled (60 % of 2 CU), and 2 refused QUOTA_EXCEEDED at 1,000,000 wt each
        return [
            row(ent, ts, "admit", estimated_wt=1.0),
            _served(ent, ts, 0.6 * 2 * HOUR_WT_PER_CU),
            row(ent, ts, "throttle", reason="QUOTA_EXCEEDED", estimated_wt=1_000_000.0),
            row(ent, ts, "throttle", reason="QUOTA_EXCEEDED", estimated_wt=1_000_000.0),
        ]

    every_hour(ent, lambda i, ts: [dict(r) for r in hour(i, ts)])
    _run()
    f = _kinds(ent)
    assert set(f) == {"grow"}
    g = f["grow"]
    # rollups_add counts each row once: 1 admit row + 2 throttles an hour → 2 of 3 attempted
    assert g.evidence["tenant_throttles"] == 2 * 336
    # demand (4,320,000 settled + 2,000,000 refused) ÷ 3,600,000 = 1.7556 CU ÷ 0.7 = 2.508 → 2.6
    assert g.recommended == {"cu": 2.6}
    assert g.cu_delta == Decimal("0.600")


@pytest.mark.django_db
@pytest.mark.parametrize(("admits", "throttles", "grows"), [(99, 1, False), (98, 2, True)])
def test_grow_needs_tenant_throttles_above_one_percent_of_arrivals(grant, _run, admits, throttles, grows):
    ent = grant("2")

    def hour(i, ts):
        if i:
            return []
        out = [row(ent, ts, "admit", estimated_wt=1.0) for _ in range(admits)]
        return out + [row(ent, ts, "throttle", reason="CONCURRENCY_LIMIT", estimated_wt=1.0)] * throttles

    every_hour(ent, hour)
    _run()
    f = _kinds(ent)
    assert ("grow" in f) is grows  # 1 of 100 is not above 1 %; 2 of 100 is
    if grows:
        assert f["grow"].evidence["tenant_throttle_share"] == 0.02


@pytest.mark.django_db
def test_grow_for_best_effort_that_borrows_most_days(grant, fleet, _run):
    ent = grant("1", traffic_class="best_effort", overage="borrow", borrowing_limit_cu=Decimal("2"))
    # at 14:00 every day it settled 1.5 CU for the hour: above its own 1 CU
    every_hour(ent, lambda i, ts: [_served(ent, ts, (1.5 if ts.hour == 14 else 0.3) * HOUR_WT_PER_CU)])
    _run()
    g = _kinds(ent)["grow"]
    assert g.evidence["borrow_days"] == 14 and g.evidence["days"] == 14
    assert g.recommended["launch_request"] is True and g.recommended["traffic_class"] == "reserved"


@pytest.mark.django_db
def test_envelope_drift_resizes_the_envelope_with_the_sizing_code(grant, _run):
    Accelerator.objects.filter(slug="h100-test").update(cloud_on_demand_per_hour=2.5)  # sizing prices its answer
    ent = grant("2")
    # settled prompts of 6,000 tokens against a promised p95 of 4,000 (×1.26 tolerance = 5,040); 50 % use
    every_hour(ent, lambda i, ts: [_served(ent, ts, 0.5 * 2 * HOUR_WT_PER_CU, prompt=6000, output=300)])
    _run()
    f = _kinds(ent)
    assert set(f) == {"envelope_drift"}
    d = f["envelope_drift"]
    assert d.evidence["drift"] == {
        "outside_share": False,
        "prompt_p95": True,
        "output_p95": False,
        "concurrency": False,
    }
    env = d.recommended["envelope"]
    # 6,000 lies in bin [3981, 6310): the p50 and p95 are read inside it, rounded up to tens
    assert 5040 < env["prompt_p95"] <= 6310 and env["max_prompt_tokens"] == 8000
    assert env["output_p95"] == 800  # the promised one stands: observed is below it
    assert "sizing_error" not in d.recommended, d.recommended
    sized = d.recommended["sizing"]
    assert sized["prompt_tokens"]["p95"] == env["prompt_p95"] and sized["arrival_rate_rps"] == 1 / 3600
    assert d.recommended["cu"] > 0 and d.cu_delta == Decimal(str(d.recommended["cu"])) - ent.cu


@pytest.mark.django_db
def test_platform_owes_puts_the_pool_in_review_with_its_hours(grant, _run):
    ent = grant("2")
    hot = {100, 101, 250}

    def hour(i, ts):
        out = [_served(ent, ts, 0.5 * 2 * HOUR_WT_PER_CU)]
        if i in hot:
            out.append(row(ent, ts, "throttle", reason="PLATFORM_CAPACITY", estimated_wt=10.0))
        return out

    every_hour(ent, hour)
    _run()
    f = _kinds(ent)
    assert set(f) == {"platform_owes"}
    p = f["platform_owes"]
    assert p.evidence["platform_throttles"] == 3
    review = PoolReview.objects.get(finding=p)
    assert review.pool_id == ent.pool_id and review.closed_at is None
    assert len(review.hours) == 3 and set(review.hours.values()) == {1}


@pytest.mark.django_db
def test_a_rerun_refreshes_the_open_finding_and_closes_one_no_longer_seen(grant, _run):
    ent = grant("2")
    every_hour(ent, lambda i, ts: [_served(ent, ts, 0.2 * 2 * HOUR_WT_PER_CU)])
    _run()
    _run()
    assert Finding.objects.filter(entitlement=ent).count() == 1
    f = Finding.objects.get(entitlement=ent)
    assert [a.act for a in f.acts.all()] == ["found", "refreshed"]


@pytest.mark.django_db
def test_platform_owes_for_latency_misses_inside_the_envelope(grant, _run):
    ent = grant("2")

    def hour(i, ts):
        # half the rate every hour; in hour 50 two settled requests missed the latency target, the
        # tenant inside its envelope and rate in that minute: the platform's miss
        slo = {"slo_met": False, "ttft_ms": 5000.0} if i == 50 else {"slo_met": True, "ttft_ms": 100.0}
        return [_served(ent, ts, 0.5 * 2 * HOUR_WT_PER_CU / 60, **slo), _served(ent, ts, 1000.0, **slo)]

    every_hour(ent, hour, with_minutes=True)
    _run()
    p = _kinds(ent)["platform_owes"]
    assert (p.evidence["platform_misses"], p.evidence["platform_throttles"]) == (2, 0)
    assert list(p.recommended["hours"].values()) == [2]
