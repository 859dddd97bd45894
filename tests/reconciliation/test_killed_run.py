"""Done-when (issue 34.3): a Celery worker is SIGKILLed part-way through a reconciliation run; the
redelivered task, on a second worker, takes the run over once the dead worker's heartbeat is stale
and finishes it once: every entitlement read, every finding written once (the killed worker's kept,
not written again), the run succeeded with two claims. Before the run had a heartbeat, the killed
run stayed RUNNING for good and the redelivery stepped aside."""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.db import connection

from reconciliation.models import Finding, FindingAct, ReconciliationRun
from tests.factories import TenantFactory
from tests.forecasting.test_celery_redelivery import _kill, _wait_for
from tests.reconciliation.conftest import every_hour, row, window
from tests.servers.redis import RedisServer

ROOT = Path(__file__).resolve().parents[2]
HOUR_WT_PER_CU = 1000.0 * 3600  # llama-test: 1000 wt/s per CU


def _worker(name: str, log: Path, broker: str) -> subprocess.Popen:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.reconciliation.celery_settings",
        # The worker must use pytest-django's test database (test_<name>), not the one in the URL.
        "DATABASE_URL": f"postgres://{db['USER']}{':' + db['PASSWORD'] if db['PASSWORD'] else ''}"
        f"@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": broker,
        # Longer than the run takes (~4 × 3 s): only the killed worker's unacknowledged message comes back.
        "CELERY_VISIBILITY_TIMEOUT": "30",
    }
    # The pool production runs (prefork), in its own session so SIGKILL reaches the whole worker.
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "--pool=prefork", "--concurrency=1",
         "-n", f"{name}@%h", "--without-mingle", "--without-gossip", "-l", "INFO"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_a_killed_reconciliation_run_is_taken_over_and_finished_once(transactional_db, grant, fleet, tmp_path):
    # Given four entitlements, each using 20 % of its 2 CU every hour as 60 requests (a right-size-down
    # finding each, as in test_rules)
    tenants = [fleet.acme, fleet.globex, TenantFactory(slug="initech"), TenantFactory(slug="umbrella")]
    ents = [grant("2", tenant=tenant) for tenant in tenants]
    for ent in ents:
        every_hour(ent, lambda i, ts, ent=ent: [row(ent, ts, "complete", actual_wt=0.2 * 2 * HOUR_WT_PER_CU / 60,
                                                    prompt_tokens=1000, output_tokens=200)] * 60)  # fmt: skip
    start, end = window()
    run = ReconciliationRun.objects.create(window_start=start, window_end=end)
    broker_dir = tmp_path / "redis"
    broker_dir.mkdir()
    broker = RedisServer(broker_dir)
    broker.start()
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    w1 = _worker("w1", logs[0], broker.url)
    w2 = None
    try:
        Celery(broker=broker.url).send_task("reconciliation.tasks.run_reconciliation", args=[str(run.pk)])
        # When the worker has written the first entitlement's finding and is on the next one
        _wait_for("a finding written (or the run over)",
                  lambda: FindingAct.objects.exists() or ReconciliationRun.objects.get(pk=run.pk).is_done, logs)  # fmt: skip
        _kill(w1)
        first = ReconciliationRun.objects.get(pk=run.pk)
        assert FindingAct.objects.exists(), first.status
        kept = list(Finding.objects.values_list("pk", flat=True))
        assert first.status == "running" and 0 < len(kept) < len(ents)
        # and its message comes back to another worker
        w2 = _worker("w2", logs[1], broker.url)
        _wait_for("the run to finish", lambda: ReconciliationRun.objects.get(pk=run.pk).is_done, logs, deadline_s=240)
    finally:
        for p in (w1, w2):
            if p is not None:
                _kill(p)
        broker.stop()
    # Then the second worker took it over and finished it, and nothing was written twice
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert (run.attempts, run.entitlements_read, run.findings_written) == (2, 4, 4)
    assert run.claimed_by != first.claimed_by
    assert run.started_at > first.heartbeat_at + timedelta(seconds=8)  # taken over only once stale
    found = Finding.objects.filter(run=run)
    assert sorted(found.values_list("entitlement_id", flat=True)) == sorted(e.pk for e in ents)
    assert set(found.values_list("kind", "state")) == {("right_size_down", "open")}
    assert Finding.objects.count() == 4
    assert list(FindingAct.objects.values_list("act", flat=True)) == ["found"] * 4  # none refreshed
    assert set(kept) <= set(found.values_list("pk", flat=True))
