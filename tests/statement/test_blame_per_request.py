"""Issue 33: latency blame is decided per request (docs/contract.md §8 `latency.missed: {platform,
outside_envelope}`), served is `status: ok`, and reconciliation's `platform owes` counts the same misses.

Every event goes through the real ingest and fold; the statement reads only the rollups."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from entitlements.services import entitlement_grant
from reconciliation.models import Finding
from reconciliation.services import run_request
from telemetry.fold import fold
from telemetry.services import ingest_events
from telemetry.statement import statement
from tests.factories import ENVELOPE, grant_kwargs
from tests.statement.conftest import _done, _ev
from tests.telemetry.helpers import T0

S = timedelta(seconds=1)
H = timedelta(hours=1)
MISS = {"slo_met": False, "ttft_ms": 5000, "e2e_ms": 9000}


@pytest.fixture
def ent(fleet):
    # 2 CU reserved on llama-test; envelope: prompts up to 8,000 tokens, outputs up to 2,000
    return entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=T0 - H, days=1), actor=fleet.operator, reason="t"
    )


def _ingest(events: list[dict]) -> None:
    got = ingest_events(source="gw", events=events)
    assert (got.accepted, got.errors) == (len(events), [])
    fold()


@pytest.mark.django_db
def test_a_refused_out_of_envelope_request_does_not_take_its_minutes_misses_off_the_platform(ent):
    # one minute: a request refused OUTSIDE_ENVELOPE (a 9,500-token prompt) and two in-envelope requests
    # that missed the SLO. Blamed per minute (the old rule) both misses read "outside the envelope".
    _ingest([
        _ev("o1", 5 * S, ent, decision="throttle", reason="OUTSIDE_ENVELOPE", prompt_tokens=9_500),
        _done("m1", 10 * S, ent, 1_000, 500, 100, **MISS),
        _done("m2", 20 * S, ent, 1_000, 800, 300, **MISS),
    ])  # fmt: skip
    s = statement(ent, T0, T0 + H)
    assert s["latency"]["missed"] == {
        "total": 2, "platform": 2, "outside_envelope": 0, "unclassified": 0, "platform_hours": {T0.isoformat(): 2},
    }  # fmt: skip
    assert s["requests"]["throttled"]["by_reason"] == {"OUTSIDE_ENVELOPE": 1}
    assert s["latency"]["inside_envelope"] == {"served": 2, "met": 0, "attainment": 0.0}


@pytest.mark.django_db
def test_each_request_is_judged_on_its_own_lengths_caps_and_capacity(ent):
    over_prompt, over_output = ENVELOPE.max_prompt_tokens + 1, ENVELOPE.max_output_tokens + 1
    _ingest([
        _done("in", 1 * S, ent, 1_000, 100, 100, **MISS),  # platform
        _done("at-max", 2 * S, ent, 1_000, ENVELOPE.max_prompt_tokens, ENVELOPE.max_output_tokens, **MISS),  # platform
        _done("long-prompt", 3 * S, ent, 1_000, over_prompt, 100, **MISS),  # outside
        _done("long-output", 4 * S, ent, 1_000, 100, over_output, **MISS),  # outside
        # admission capped the settled output at the envelope's max and said so: it ran past it
        _done("capped", 5 * S, ent, 1_000, 100, ENVELOPE.max_output_tokens, output_capped=True, **MISS),
        _done("borrowed", 6 * S, ent, 1_000, 100, 100, source_kind="borrowed", **MISS),  # beyond the rate bought
        # no entitlement named: judged against its exact scope's envelope, this entitlement's
        _done("scope", 7 * S, None, 1_000, 100, 100, **MISS),  # platform
        _done("met", 8 * S, ent, 1_000, 100, 100, slo_met=True, ttft_ms=100),
        _done("met-out", 9 * S, ent, 1_000, over_prompt, 100, slo_met=True, ttft_ms=100),
    ])  # fmt: skip
    lat = statement(ent, T0, T0 + H)["latency"]
    assert (lat["served"], lat["met"]) == (9, 2)
    assert lat["missed"] == {
        "total": 7, "platform": 3, "outside_envelope": 4, "unclassified": 0, "platform_hours": {T0.isoformat(): 3},
    }  # fmt: skip
    assert lat["inside_envelope"] == {"served": 4, "met": 1, "attainment": 0.25}


@pytest.mark.django_db
def test_served_is_status_ok_and_the_rest_are_shown_apart(ent):
    _ingest([
        _done("ok", 1 * S, ent, 1_000, 100, 100, status="ok", slo_met=True, ttft_ms=100),
        _done("ok-miss", 2 * S, ent, 1_000, 100, 100, status="ok", **MISS),
        _done("err", 3 * S, ent, 500, 100, 10, status="error", **MISS),
        _done("err2", 4 * S, ent, 500, 100, 0, status="error"),
        _done("cancel", 5 * S, ent, 700, 100, 20, status="cancelled", **MISS),
        _done("expired", 6 * S, ent, 900, 100, 0, status="expired"),
    ])  # fmt: skip
    s = statement(ent, T0, T0 + H)
    assert s["requests"]["served"] == 2
    assert s["requests"]["not_served"] == {"error": 2, "cancelled": 1, "expired": 1, "total": 4}
    # latency is the served requests' only: the errored and cancelled misses are not counted in it
    assert (s["latency"]["served"], s["latency"]["met"]) == (2, 1)
    assert s["latency"]["missed"]["platform"] == 1
    # every completion consumed capacity: used counts them all (1,000 + 1,000 + 500 + 500 + 700 + 900)
    assert s["used"]["wt"] == 4_600


@pytest.mark.django_db
def test_platform_owes_counts_the_misses_of_a_minute_with_a_refused_request(ent, django_capture_on_commit_callbacks):
    _ingest([
        _ev("o1", 5 * S, ent, decision="throttle", reason="OUTSIDE_ENVELOPE", prompt_tokens=9_500),
        _done("m1", 10 * S, ent, 1_000, 500, 100, **MISS),
        _done("m2", 20 * S, ent, 1_000, 800, 300, **MISS),
    ])  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        run = run_request()
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    owes = Finding.objects.get(entitlement=ent, kind="platform_owes", state="open")
    assert (owes.evidence["platform_misses"], owes.evidence["platform_throttles"]) == (2, 0)
    assert owes.recommended["hours"] == {T0.isoformat(): 2}
