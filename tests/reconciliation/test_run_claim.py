"""A reconciliation run is claimed like a forecast run (runs.claims, issue 34.3), in one process:
a live claim is left alone, a stale one is taken over and finished once, a lost claim writes nothing.
(The SIGKILLed worker itself: test_killed_run.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reconciliation import services
from reconciliation.models import Finding, FindingAct, ReconciliationRun
from runs import claims
from tests.reconciliation.conftest import every_hour, row, window

HOUR_WT_PER_CU = 1000.0 * 3600


def _small_use(ent):
    every_hour(ent, lambda i, ts: [row(ent, ts, "complete", actual_wt=0.2 * 2 * HOUR_WT_PER_CU / 60,
                                       prompt_tokens=1000, output_tokens=200)] * 60)  # fmt: skip


def _run():
    start, end = window()
    return ReconciliationRun.objects.create(window_start=start, window_end=end)


@pytest.mark.django_db
def test_a_live_claim_is_left_alone_and_a_stale_one_taken_over_once(grant, settings):
    settings.RECONCILE_RUN_STALE_AFTER_S = 60
    ent = grant("2")
    _small_use(ent)
    run = _run()
    assert claims.claim(ReconciliationRun, pk=run.pk, worker="w1") == "claimed"
    # a redelivery while w1 checkpoints: nothing happens
    assert services.run_execute(run.pk, worker="w2").status == "running"
    assert not Finding.objects.exists()
    # w1 goes quiet past the staleness
    ReconciliationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    done = services.run_execute(run.pk, worker="w2")
    assert (done.status, done.claimed_by, done.attempts) == ("succeeded", "w2", 2)
    assert (done.entitlements_read, done.findings_written) == (1, 1)
    # w1 wakes up: every write it tries is refused
    assert claims.heartbeat(ReconciliationRun, pk=run.pk, worker="w1") is False
    assert claims.finish(ReconciliationRun, pk=run.pk, worker="w1") is False
    assert claims.fail(ReconciliationRun, pk=run.pk, worker="w1", error="x") is False
    assert services.run_execute(run.pk, worker="w3").status == "succeeded"  # done: a late redelivery does nothing
    assert ReconciliationRun.objects.get(pk=run.pk).attempts == 2


@pytest.mark.django_db
def test_the_taker_counts_a_finding_its_run_already_wrote_and_does_not_write_it_again(grant, settings):
    settings.RECONCILE_RUN_STALE_AFTER_S = 60
    ent = grant("2")
    _small_use(ent)
    run = _run()
    services.run_execute(run.pk, worker="w1")
    f = Finding.objects.get()
    # as if w1 had died after writing this entitlement's finding: the run back to RUNNING, stale
    ReconciliationRun.objects.filter(pk=run.pk).update(
        status="running", claimed_by="w1", heartbeat_at=timezone.now() - timedelta(seconds=61), findings_written=0
    )
    again = services.run_execute(run.pk, worker="w2")
    assert (again.status, again.attempts, again.findings_written) == ("succeeded", 2, 1)
    assert list(FindingAct.objects.filter(finding=f).values_list("act", flat=True)) == ["found"]
    # a later run over the same window refreshes it (a different run's finding)
    services.run_execute(_run().pk, worker="w3")
    assert list(FindingAct.objects.filter(finding=f).order_by("at").values_list("act", flat=True)) == [
        "found",
        "refreshed",
    ]


@pytest.mark.django_db
def test_a_claim_lost_mid_run_writes_nothing_more(grant, settings, monkeypatch):
    ent = grant("2")
    _small_use(ent)
    run = _run()
    real = services.figures.read

    def taken_over_meanwhile(*args, **kwargs):
        ReconciliationRun.objects.filter(pk=run.pk).update(claimed_by="someone-else")
        return real(*args, **kwargs)

    monkeypatch.setattr(services.figures, "read", taken_over_meanwhile)
    out = services.run_execute(run.pk, worker="w1")
    assert (out.status, out.claimed_by) == ("running", "someone-else")
    assert not Finding.objects.exists() and not FindingAct.objects.exists()
