"""Every figure of the statement equals its hand-computed value (issue 17.1)."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from entitlements.models import EntitlementHistory
from entitlements.services import entitlement_amend, entitlement_grant
from telemetry.statement import statement
from tests.factories import grant_kwargs
from tests.telemetry.helpers import T0

H = timedelta(hours=1)
M = timedelta(minutes=1)
S = timedelta(seconds=1)


def _geo(b: int, frac: float, top: float | None = None) -> float:
    """A histogram percentile read `frac` of the way into bin b ([10^((b−1)/5), 10^(b/5))), the bin
    narrowed to end at `top` (the longest value counted) when that lies inside it."""
    lo, hi = 10 ** ((b - 1) / 5), min(10 ** (b / 5), top or math.inf)
    return round(lo * (hi / lo) ** frac, 1)


@pytest.mark.django_db
def test_every_figure_of_two_hours(known):
    s = statement(known, T0, T0 + 2 * H)
    assert s["entitlement"] == str(known.uuid)
    assert s["period"] == {"start": T0.isoformat(), "end": (T0 + 2 * H).isoformat()}
    # 2 CU × 2 h
    assert s["bought"]["cu"] == 2.0
    assert s["bought"]["cu_hours"] == 4.0
    # 60,000 + 30,000 + 24,000 + 12,000 + 6,000 wt settled = 132,000 wt ÷ 1000 wt/s ÷ 3600 s
    assert s["used"]["wt"] == 132_000
    assert s["used"]["cu_hours"] == 0.036667
    assert s["used"]["share"] == 0.009167
    # minute T0: 90,000 wt of 2 CU × 1000 × 60 = 120,000 → 0.75; T0+2m 0.2; T0+61m 18,000 → 0.15
    assert s["used"]["peak_share_1m"] == 0.75
    # 120 minutes bought, 3 used: the 114th of 120 ranked is an idle minute
    assert s["used"]["p95_share_1m"] == 0.0
    assert s["requests"] == {
        "attempted": 15,
        "admitted": 5,
        "served": 5,
        "not_served": {"error": 0, "cancelled": 0, "expired": 0, "total": 0},
        "throttled": {
            "total": 10,
            "tenant": 5,
            "platform": 5,
            "by_party": {"tenant": 5, "platform policy": 1, "platform": 4, "unknown": 0},
            "by_reason": {
                "ADMISSION_UNAVAILABLE": 1,
                "CONCURRENCY_LIMIT": 1,
                "NOT_ENTITLED": 1,
                "OUTSIDE_ENVELOPE": 2,
                "PLACEMENT": 1,
                "PLATFORM_CAPACITY": 2,
                "QUOTA_EXCEEDED": 1,
                "RECLAIMED": 1,
            },
        },
    }
    lat = s["latency"]
    assert (lat["served"], lat["met"], lat["attainment"]) == (4, 3, 0.75)
    assert lat["target"] == {"ttft_p99_ms": 2000, "tpot_p99_ms": 200}
    # the slowest of four TTFTs (5000 ms) lies in bin [3981, 6310): the p99 is read inside it
    assert 3981 <= lat["observed"]["ttft_p99_ms"] < 6310
    # c2's miss is the platform's: its prompt (3000) and output (600) inside the envelope's 8,000 and 2,000
    assert lat["missed"] == {
        "total": 1,
        "platform": 1,
        "outside_envelope": 0,
        "unclassified": 0,
        "platform_hours": {T0.isoformat(): 1},
    }
    assert lat["inside_envelope"] == {"served": 4, "met": 3, "attainment": 0.75}
    env = s["envelope"]
    assert env["promised"]["max_prompt_tokens"] == 8000 and env["promised"]["output_p95"] == 800
    # settled prompts 100, 200, 500, 1000, 3000 fall in bins 11, 12, 14, 16, 18 (edges 10^(i/5));
    # the p50's rank 2.5 is half-way into bin 14 ([10^2.6, 10^2.8)), the p95's 4.75 three quarters
    # into bin 18 narrowed to end at the longest prompt, 3000; outputs 50, 100, 100, 200, 600: bins 9,
    # 11, 11, 12, 14, the p95 in bin 14 narrowed to end at 600
    assert env["observed"] == {
        "prompt_p50": _geo(14, 0.5),
        "prompt_p95": _geo(18, 0.75, top=3000),
        "prompt_max": 3000,
        "output_p50": _geo(11, 0.75),  # rank 2.5: 1 before bin 11, 1.5 of its 2
        "output_p95": _geo(14, 0.75, top=600),
        "output_max": 600,
        "concurrency_peak": 3,
        "prompt_mean": 960.0,  # 4800 ÷ 5
        "output_mean": 210.0,  # 1050 ÷ 5
    }
    assert env["within"] == {
        "prompt_p50": True,  # 501.2 ≤ 1000
        "prompt_p95": True,  # 2869.7 ≤ 4000
        "prompt_max": True,
        "output_p50": True,  # 141.3 ≤ 200
        "output_p95": True,  # 541.5 ≤ 800
        "output_max": True,
        "concurrency_peak": True,  # 3 ≤ 64
    }
    assert env["outside"] == 2
    assert env["share_outside"] == 0.133333  # 2 of 15 attempted
    assert s["borrowing"] == {"cu_hours": 0.0, "reclaims": 1, "reclaim_latency_p95_s": None}
    # $2.50 × 8 H100 per replica ÷ 70 CU per replica = $0.285714 per CU-hour × 4 bought CU-hours
    assert s["cost"]["usd"] == 1.14
    assert s["cost"]["cu_hours"] == 4.0
    assert "$0.2857 per CU-hour" in s["cost"]["basis"]


@pytest.mark.django_db
def test_ragged_period_reads_minutes_at_the_edges_and_hours_between(known):
    # [T0+1m, T0+1h) from minutes (c5), [T0+1h, T0+2h) from hours (c3, c4), [T0+2h, T0+2h+1m) from minutes
    s = statement(known, T0 + M, T0 + 2 * H + M)
    assert s["requests"]["served"] == 3
    assert s["used"]["wt"] == 42_000
    assert s["bought"]["cu_hours"] == 4.0


@pytest.mark.django_db
def test_p95_of_minutes_counts_idle_minutes(known):
    # 20 minutes bought: shares 0.75 (T0) and 0.2 (T0+2m), 18 idle; rank ⌈19⌉ = 19 → the smaller used one
    s = statement(known, T0, T0 + 20 * M)
    assert s["used"]["p95_share_1m"] == 0.2
    assert s["used"]["peak_share_1m"] == 0.75


@pytest.mark.django_db
def test_window_bounds_what_was_bought_and_a_late_amendment_does_not_rewrite_it(fleet):
    kw = grant_kwargs(fleet.pool_a, fleet.acme, Decimal("3"), start=T0 + 30 * M)
    ent = entitlement_grant(**{**kw, "ends_at": T0 + 90 * M}, actor=fleet.operator, reason="test")
    # only [T0+30m, T0+90m) of [T0, T0+2h): 3 CU × 1 h
    assert statement(ent, T0, T0 + 2 * H)["bought"]["cu_hours"] == 3.0
    # lengthened today: those past hours were not bought back then
    entitlement_amend(actor=fleet.operator, reason="longer", entitlement=ent, ends_at=T0 + 2 * H)
    assert statement(ent, T0, T0 + 2 * H)["bought"]["cu_hours"] == 3.0


@pytest.mark.django_db
def test_amendment_counts_from_the_moment_it_was_made(fleet):
    now = timezone.now().replace(microsecond=0)
    ent = entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=now - 2 * H, days=1),
        actor=fleet.operator,
        reason="test",
    )
    entitlement_amend(actor=fleet.operator, reason="grow", entitlement=ent, cu=Decimal("5"))
    at = EntitlementHistory.objects.filter(entitlement_id=ent.pk).order_by("pk").last().at
    start, end = now - H, now + H
    s = statement(ent, start, end)
    # The rule's own arithmetic (entitlements.bought.cu_hours: CU × seconds ÷ 3600 per step): written as
    # 2 × (seconds ÷ 3600) the float differs in its last bit, and where the sum sits on a half-millionth
    # (the amendment's microseconds decide) the 6-decimal rounding went the other way (CI, 5 Dec).
    before, after = (at - start).total_seconds(), (end - at).total_seconds()
    assert s["bought"]["cu"] == 5.0
    assert s["bought"]["cu_hours"] == round(2.0 * before / 3600 + 5.0 * after / 3600, 6)
    assert [step["cu"] for step in s["bought"]["steps"]] == [2.0, 5.0]
