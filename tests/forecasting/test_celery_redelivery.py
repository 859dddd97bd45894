"""Done-when: a real worker and beat run a forecast fanned out in chunks; the worker is SIGKILLed
mid-chunk; a new worker gets that chunk's redelivered message, re-claims the chunk (not the run) and
the run completes once — every series written exactly once (issue 21.2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from forecasting.models import ForecastChunk, ForecastRun, ForecastSeries
from tests import factories as f
from tests.forecasting.helpers import END, daily_cu, write_demand
from tests.servers.redis import RedisServer

ROOT = Path(__file__).resolve().parents[2]
N_SERIES = 6
CHUNK = 2  # three chunks


def _env(broker: str) -> dict[str, str]:
    db = connection.settings_dict
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.forecasting.celery_settings",
        # The worker must use pytest-django's test database (test_<name>), not the one in the URL.
        "DATABASE_URL": f"postgres://{db['USER']}{':' + db['PASSWORD'] if db['PASSWORD'] else ''}"
        f"@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": broker,
        # Longer than a chunk takes here (~15 s), so no copy of a running chunk is redelivered while its
        # worker lives: the killed chunk comes back only because its message was never acknowledged.
        "CELERY_VISIBILITY_TIMEOUT": "40",
    }


def _start(args: list[str], log: Path, broker: str) -> subprocess.Popen:
    # Own session, so SIGKILL reaches the whole worker (no orphaned child keeps computing).
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", *args],
        cwd=ROOT,
        env=_env(broker),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _worker(name: str, log: Path, broker: str) -> subprocess.Popen:
    # The pool production runs (prefork). With --pool=solo this test passed even with acks_late off.
    return _start(
        ["worker", "--pool=prefork", "--concurrency=1", "-n", f"{name}@%h", "--without-mingle", "--without-gossip",
         "-l", "INFO"], log, broker,
    )  # fmt: skip


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_for(what: str, predicate, logs: list[Path], deadline_s: float = 900) -> None:
    # A safety net so a broken setup fails instead of hanging; not a performance assertion.
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {p.name}\n" + p.read_text()[-3000:] for p in logs if p.exists())
    pytest.fail(f"gave up waiting for {what}\n{tails}")


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_a_killed_workers_chunk_is_redelivered_and_the_run_completes_once(transactional_db, tmp_path):
    # A broker of its own (a throwaway redis-server): nothing queued by another run, nothing flushed.
    broker_dir = tmp_path / "redis"
    broker_dir.mkdir()
    broker = RedisServer(broker_dir)
    broker.start()
    try:
        _run_and_kill_a_worker(tmp_path, broker.url)
    finally:
        broker.stop()


def _run_and_kill_a_worker(tmp_path: Path, broker: str) -> None:
    f.build_fleet()
    for i in range(N_SERIES):
        write_demand(
            tenant=f"t{i}",
            model="llama-test",
            region="us-test",
            cu=daily_cu(24 * 21, base=50, amp=20, noise=3, seed=i),
            r=1000,
        )
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    params = {"end": END.isoformat(), "batch_size": 1, "pause_between_batches_s": 2, "chunk_size": CHUNK}
    PeriodicTask.objects.filter(task="forecasting.tasks.schedule_forecast").delete()
    PeriodicTask.objects.create(
        name="test forecast",
        task="forecasting.tasks.schedule_forecast",
        interval=every_second,
        one_off=True,
        kwargs=json.dumps(params),
    )
    logs = [tmp_path / "beat.log", tmp_path / "w1.log", tmp_path / "w2.log"]
    beat = _start(["beat", "--max-interval", "1", "-s", str(tmp_path / "beat-schedule")], logs[0], broker)
    w1 = _worker("w1", logs[1], broker)
    w2 = None
    try:
        # Given the first worker has landed one chunk and is part-way through the next
        _wait_for(
            "a chunk written and the next one running",
            lambda: (
                ForecastRun.objects.filter(chunks_done__gte=1).exists()
                and ForecastChunk.objects.filter(state="running").exists()
            ),
            logs,
        )
        run = ForecastRun.objects.get()
        assert run.status == "running" and run.chunks_total == N_SERIES // CHUNK
        # When that worker dies without a chance to clean up, and another starts
        _kill(w1)
        _kill(beat)
        killed = ForecastChunk.objects.get(state="running")
        landed = set(ForecastChunk.objects.filter(state="done").values_list("pk", flat=True))
        w2 = _worker("w2", logs[2], broker)
        _wait_for("the run to finish", lambda: ForecastRun.objects.get(pk=run.pk).is_done, logs)
        # The killed chunk was re-claimed by w2's pool process (a child of w2), read while it is alive.
        claimer = ForecastChunk.objects.get(pk=killed.pk).claim_token.split(":")[1]
        claimer_parent = Path(f"/proc/{claimer}/stat").read_text().rsplit(")", 1)[1].split()[1]
    finally:
        for p in (w1, beat, w2):
            if p is not None:
                _kill(p)
    # Then the redelivered chunk was re-claimed and written once; the run was not redone; it finished once
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert (run.attempts, run.results_written, run.chunks_done, run.progress) == (1, 1, N_SERIES // CHUNK, 100)
    chunks = {c.pk: c for c in ForecastChunk.objects.filter(run=run)}
    assert [c.writes for c in chunks.values()] == [1] * len(chunks)
    assert chunks[killed.pk].attempts == 2
    assert all(chunks[pk].attempts == 1 for pk in landed)
    assert run.series_count == N_SERIES
    written = list(ForecastSeries.objects.filter(run=run).values_list("tenant_slug", flat=True))
    assert sorted(written) == [f"t{i}" for i in range(N_SERIES)]  # every series, once
    assert ForecastRun.objects.count() == 1
    assert claimer_parent == str(w2.pid)  # prefork: the chunk ran in a child of the second worker


def test_a_dead_workers_task_is_redelivered_in_minutes_not_an_hour(settings):
    # kombu's Redis transport redelivers an unacked message after the visibility timeout.
    assert 60 <= settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] <= 600
