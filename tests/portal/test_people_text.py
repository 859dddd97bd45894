"""The people's-text filters (portal/templatetags/people.py, docs/pages.md)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

from django.template import engines

from entitlements.reasons import REASONS
from portal.templatetags.people import digits, evidence_rows, when, words


def test_one_date_format_with_the_zone():
    kolkata = timezone(timedelta(hours=5, minutes=30))
    assert when(datetime(2026, 12, 1, 19, 35, tzinfo=kolkata)) == "2026-12-01 14:05 UTC"
    assert when("2026-11-01T20:49:00+00:00") == "2026-11-01 20:49 UTC"
    assert when(date(2026, 12, 1)) == "2026-12-01"
    assert when(None) == ""


def test_keys_in_words_and_evidence_formatted():
    assert words("partially_approved") == "partially approved"
    assert words("best_effort") == "best effort"
    rows = dict(
        evidence_rows({"p95_hourly_use_share": 0.30123, "tenant_throttles": 3231899, "p95_hourly_use_cu": 14.660312})
    )
    assert rows["busiest 5 % of hours: share of what was bought used"] == "30.1 %"
    assert rows["requests refused for quota, concurrency or budget"] == "3,231,899"
    assert rows["busiest 5 % of hours: CU used"] == "14.6603"
    nested = dict(evidence_rows({"observed": {"prompt_p95": 1200, "concurrency_peak": 12}}))
    assert nested["observed"] == "prompt p95 1,200; peak in flight 12"
    assert digits("10839 = max(1, 262754 ÷ 784.6)") == "10,839 = max(1, 262,754 ÷ 784.6)"
    # A pool in review's evidence is keyed by hour: each hour reads in the one date format.
    hours = dict(evidence_rows({"hours": {"2026-11-30T03:00:00+00:00": 442, "2026-11-30T04:00:00+00:00": 12345}}))
    assert hours["hours read"] == "2026-11-30 03:00 UTC 442; 2026-11-30 04:00 UTC 12,345"
    # Only a date-shaped text is a time (fromisoformat alone would take a bare 20261130).
    assert dict(evidence_rows({"batch": "20261130"}))["batch"] == "20261130"


def test_a_reason_code_carries_its_meaning_from_the_registry():
    html = engines["django"].from_string("{% reason 'QUOTA_EXCEEDED' %}").render({})
    assert "<code>QUOTA_EXCEEDED</code>" in html and REASONS["QUOTA_EXCEEDED"].when in html.replace("&#x27;", "'")
    assert engines["django"].from_string("{{ t|when }}").render({"t": datetime(2026, 1, 2, 3, 4, tzinfo=UTC)}) == (
        "2026-01-02 03:04 UTC"
    )
