"""A real Celery worker for the admission-events queue ingests a batch of events while a forecast
run's chunks fill the default queue (issue 29: behind them events landed 60-109 s late). Shown by
order, not by a clock: the events are in the database while all the chunk messages still wait."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from admission import events
from config.celery import app
from telemetry.models import AdmissionEvent
from tests.admission.world import body, build_world
from tests.servers import child_db_env
from tests.servers.redis import RedisServer

ROOT = Path(__file__).resolve().parents[2]
BACKLOG = 500


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.usefixtures("memory_store")
def test_events_are_ingested_past_a_backlog_of_forecast_chunks(transactional_db, fleet, sink, tmp_path):
    w = build_world(fleet)
    for i in range(3):
        assert (
            w.gateway.post("/api/v1/admission/reserve", body("acme", "reserved", f"q-{i}"), format="json").status_code
            == 200
        )
    events.buffer().flush()
    batch = list(sink.events)
    broker = RedisServer(tmp_path)
    broker.start()
    env = {**child_db_env(), "DJANGO_SETTINGS_MODULE": "config.settings",
           "CELERY_BROKER_URL": broker.url}  # fmt: skip
    env.pop("REDIS_URL", None)
    log = tmp_path / "events-worker.log"
    worker = subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "-Q", "admission-events", "--pool=solo",
         "-n", "events@%h", "--without-mingle", "--without-gossip", "-l", "INFO"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        for _ in range(3000):  # up to ~5 min for the worker to boot on a busy machine: a hang guard
            if "ready." in log.read_text():
                break
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        with app.connection_for_write(broker.url) as conn:
            for _ in range(BACKLOG):  # what a forecast run leaves on the default queue
                app.send_task("forecasting.tasks.run_forecast_chunk", args=[0], connection=conn)
            sent = time.monotonic()
            app.send_task("admission.tasks.ingest_events_batch", args=[batch], connection=conn)
        for _ in range(1200):  # a hang guard: the worker is up, so this is its ingest alone
            if AdmissionEvent.objects.filter(event_id__startswith="q-").count() == len(batch):
                break
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        else:
            pytest.fail("the events worker never ingested the batch\n" + log.read_text()[-3000:])
        print(f"ingested {time.monotonic() - sent:.2f} s after publishing, behind {BACKLOG} chunk messages")
        assert broker.client().llen("celery") == BACKLOG  # not one chunk had to go first
    finally:
        worker.terminate()
        worker.wait(timeout=60)  # a hang guard
        broker.stop()
