"""Demo history: weeks of rollups whose requests and weighted tokens agree with the envelope."""

from datetime import UTC, datetime

import numpy as np
import pytest
from django.db.models import Sum

from demo.history import envelope_mean, lognormal_mean, seed_history
from entitlements.services import entitlement_grant
from telemetry.models import DayRollup, HourRollup, MinuteRollup
from tests.factories import ENVELOPE, grant_kwargs

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)


@pytest.fixture
def two(fleet):
    """acme 10 CU (flat) and globex 10 CU (the second entitlement: a slow trend)."""
    for tenant in (fleet.acme, fleet.globex):
        entitlement_grant(actor=fleet.operator, reason="x",
                          **grant_kwargs(fleet.pool_a, tenant, "10", start=datetime(2026, 1, 1, tzinfo=UTC), days=None))  # fmt: skip
    return fleet


def test_lognormal_mean_through_p50_and_p95():
    assert lognormal_mean(100, 100) == 100
    # σ = ln 2 / 1.6449; mean = 100·e^(σ²/2)
    assert lognormal_mean(100, 200) == pytest.approx(100 * np.exp((np.log(2) / 1.6449) ** 2 / 2))


@pytest.mark.django_db
def test_seed_history_writes_weeks_of_rollups_once(two):
    n = seed_history(days=14, now=NOW)
    assert n == HourRollup.objects.filter(decision="admit").aggregate(n=Sum("requests"))["n"]
    assert seed_history(days=14, now=NOW) == 0
    assert HourRollup.objects.filter(decision="admit").values("bucket").distinct().count() == 14 * 24
    # 10-minute samples are history at hour and day grain only: a minute chart would show 10× spikes
    assert not MinuteRollup.objects.exists()
    assert DayRollup.objects.aggregate(n=Sum("requests"))["n"] == HourRollup.objects.aggregate(n=Sum("requests"))["n"]


@pytest.mark.django_db
def test_requests_and_weighted_tokens_agree_with_the_envelope(two):
    seed_history(days=7, now=NOW)
    ent = two.acme.entitlements.get()
    prompt, output, wt = envelope_mean(ent)
    admits = HourRollup.objects.filter(decision="admit", tenant="acme")
    s = admits.aggregate(n=Sum("requests"), wt=Sum("estimated_wt"), prompt=Sum("prompt_tokens"))
    # Weighted tokens per request is the envelope's mean request, not 10,000× it
    assert s["wt"] / s["n"] == pytest.approx(wt)
    assert s["prompt"] / s["n"] == pytest.approx(prompt, rel=1e-3)
    done = HourRollup.objects.filter(decision="complete", tenant="acme").aggregate(
        n=Sum("requests"), out=Sum("output_tokens"), met=Sum("slo_met"), total=Sum("slo_total"),
        prompt=Sum("prompt_tokens"),
    )  # fmt: skip
    assert done["n"] == s["n"] and done["total"] == s["n"]
    assert done["out"] / done["n"] == pytest.approx(output, rel=1e-3)
    # A complete reports its prompt as a real one does: the statement's mean prompt reads completes
    # (it was 0.0 beside a p50 of ~500 on the demo's statements)
    assert done["prompt"] / done["n"] == pytest.approx(prompt, rel=1e-3)
    assert 0.97 <= done["met"] / done["total"] <= 1.0
    # Never above the entitlement: 10 CU × R 1000 wt/s × 3600 s in any hour
    assert max(admits.values_list("estimated_wt", flat=True)) <= 10 * 1000 * 3600
    assert (ENVELOPE.prompt_p50, ENVELOPE.output_p50) == (ent.prompt_p50, ent.output_p50)


@pytest.mark.django_db
def test_a_weekly_cycle_and_a_slow_trend_on_every_other_entitlement(two):
    seed_history(days=56, now=NOW)

    def weekly(tenant: str) -> np.ndarray:
        rows = HourRollup.objects.filter(decision="admit", tenant=tenant).order_by("bucket")
        wt = np.array(rows.values_list("estimated_wt", flat=True))
        return wt.reshape(8, 168)

    flat, trending = weekly("acme"), weekly("globex")
    # Weekends (the history ends on a Friday noon: Saturday and Sunday sit at the same hours of
    # every week) are quieter than weekdays
    day_means = flat.reshape(8, 7, 24).mean(axis=(0, 2))
    assert day_means.argsort()[:2].tolist() in ([1, 2], [2, 1])
    # The flat one's weekly means stay within ±5 % of their mean; the trending one grows 23.3 %
    means = flat.mean(axis=1)
    assert np.abs(means / means.mean() - 1).max() < 0.05
    growth = trending.mean(axis=1)[-1] / trending.mean(axis=1)[0]
    # Seeded (seed 11): globex draws +2.9 %/week, so week 8 over week 1 is this, to the last digit.
    assert growth == pytest.approx(1.2334092907593535, rel=1e-12)
