"""Admission events travel on a Celery queue of their own (issue 29): behind a forecast run's
chunks on the default queue they landed a minute after their decisions. Published through a real
broker (a throwaway redis-server) to see where each message lands, and `make run`'s worker set."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from config.celery import app
from tests.servers.redis import RedisServer

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "admission-events"


@pytest.mark.redis
@pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored")  # send_task publishes: what is tested
def test_events_and_the_sweep_land_on_their_queue_forecast_chunks_on_the_default(tmp_path):
    broker = RedisServer(tmp_path)
    broker.start()
    try:
        r = broker.client()
        with app.connection_for_write(broker.url) as conn:
            app.send_task("admission.tasks.ingest_events_batch", args=[[]], connection=conn)
            app.send_task("admission.tasks.sweep_expired", connection=conn)
            app.send_task("forecasting.tasks.run_forecast_chunk", args=[0], connection=conn)
        assert (r.llen(QUEUE), r.llen("celery")) == (2, 1)
    finally:
        broker.stop()


def test_make_run_has_a_worker_for_the_events_queue_and_keeps_the_general_one_off_it():
    spec = importlib.util.spec_from_file_location("run_all_q", ROOT / "bin" / "run_all.py")
    assert spec is not None and spec.loader is not None
    run_all = importlib.util.module_from_spec(spec)
    sys.modules["run_all_q"] = run_all
    spec.loader.exec_module(run_all)
    procs = {p.name: p.argv for p in run_all.plan({"REDIS_URL": "redis://127.0.0.1:6379/7"}, host="h", port=1)}
    assert procs["events"][procs["events"].index("-Q") + 1] == QUEUE
    assert procs["worker"][procs["worker"].index("-X") + 1] == QUEUE
