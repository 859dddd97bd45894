"""Which minute-rate CV an envelope is replayed at (telemetry.minute_cv.envelope_cv, issue 45.3): what the
tenant × model × class recorded over 28 days, else the catalogue's per workload kind; a stated CV below the
recorded one carries a warning. The recorded traffic here is the public code trace's minutes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.utils import timezone

from capacity.minute_cv import of_counts
from capacity.traces import parse_trace
from telemetry.minute_cv import BELOW_RECORDED, envelope_cv, recorded_cv
from telemetry.models import MinuteRollup

CODE = Path(__file__).resolve().parents[2] / "data" / "azure_llm_2023_code.csv"


def _hour_start():
    return timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)


def _code_minutes() -> np.ndarray:
    t = parse_trace(CODE.read_bytes()).arrival_s
    return np.bincount(np.floor(t / 60).astype(int), minlength=60)[:60]


def _record(counts, *, tenant="acme", model="llama-test", traffic_class="reserved", start=None, region="r1"):
    start = start or _hour_start()
    rows = []
    for i, n in enumerate(counts.tolist()):
        if not n:
            continue
        # Split over two decisions (and regions): the tenant's minute is what it sent, admitted or not.
        thr = n // 10
        for decision, k in (("admit", n - thr), ("throttle", thr)):
            if k:
                rows.append(MinuteRollup(bucket=start + timedelta(minutes=i), tenant=tenant, model=model,
                                         region=region, traffic_class=traffic_class, decision=decision,
                                         reason="QUOTA_EXCEEDED" if decision == "throttle" else "",
                                         requests=k))  # fmt: skip
    MinuteRollup.objects.bulk_create(rows)


@pytest.mark.django_db
def test_the_default_is_what_the_tenant_sent():
    counts = _code_minutes()
    _record(counts)
    got = recorded_cv("acme", "llama-test", "reserved")
    assert got is not None and got.requests == int(counts.sum())
    assert got.minute_rate_cv == pytest.approx(of_counts([counts]).minute_rate_cv)
    assert 0.95 < got.minute_rate_cv < 1.15  # the code trace's burstiness, not the conversation default
    cv = envelope_cv(tenant="acme", model="llama-test", traffic_class="reserved")
    assert cv.origin == "recorded" and cv.value == round(got.minute_rate_cv, 2) and cv.is_default
    assert "what acme × llama-test × reserved sent over the last 28 days" in cv.source
    assert cv.to_dict()["cv_source"] == cv.source and not cv.warnings


@pytest.mark.django_db
def test_another_class_model_or_tenant_is_not_the_tenants_record():
    _record(_code_minutes())
    for scope in (
        ("acme", "llama-test", "best_effort"),
        ("acme", "other", "reserved"),
        ("globex", "llama-test", "reserved"),
    ):
        cv = envelope_cv(tenant=scope[0], model=scope[1], traffic_class=scope[2])
        assert cv.origin == "catalogue" and cv.value == 0.21 and "conversation" in cv.source


@pytest.mark.django_db
def test_older_than_28_days_or_too_quiet_is_not_a_record():
    _record(_code_minutes(), start=_hour_start() - timedelta(days=29))
    _record(np.r_[np.ones(30, dtype=int), np.zeros(30, dtype=int)], tenant="quiet")  # 30 requests in its hour
    assert recorded_cv("acme", "llama-test", "reserved") is None
    assert recorded_cv("quiet", "llama-test", "reserved") is None


@pytest.mark.django_db
def test_the_catalogue_by_kind_when_nothing_is_recorded():
    assert envelope_cv(kind="coding").value == 1.04
    assert envelope_cv().value == 0.21
    assert "Azure LLM inference trace 2023, code" in envelope_cv(kind="coding").source


@pytest.mark.django_db
def test_a_stated_cv_below_the_recorded_one_is_answered_with_a_warning():
    _record(_code_minutes())
    low = envelope_cv(stated=0.21, tenant="acme", model="llama-test", traffic_class="reserved")
    assert low.value == 0.21 and low.origin == "stated" and not low.is_default
    assert [w["code"] for w in low.warnings] == [BELOW_RECORDED]
    assert "below the 1.0" in low.warnings[0]["message"]
    high = envelope_cv(stated=1.5, tenant="acme", model="llama-test", traffic_class="reserved")
    assert high.warnings == ()
    # Without a record there is nothing to be below.
    assert envelope_cv(stated=0.0, tenant="globex", model="llama-test", traffic_class="reserved").warnings == ()
