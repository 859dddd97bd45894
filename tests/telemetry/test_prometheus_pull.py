"""The Prometheus pull against a real Prometheus scraping an in-process vLLM/DCGM-style exporter."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from telemetry.models import FleetSample, PrometheusSource
from telemetry.prometheus import pull_window
from telemetry.selectors import latest_pool_health
from telemetry.tasks import pull_prometheus_source, pull_prometheus_sources

PROMETHEUS = "/usr/bin/prometheus"
CI = os.environ.get("CI", "").lower() == "true"

# (running, waiting, kv, gpu utils in %) served per pool, in two phases
PHASE_A = {"pool-a": (7, 2, 0.25, (80, 60)), "pool-b": (1, 0, 0.5, (10, 30))}
PHASE_B = {"pool-a": (9, 4, 0.75, (90, 70)), "pool-b": (3, 1, 0.125, (20, 40))}


def _expected(phase):
    return {p: (float(r), float(w), kv, sum(u) / len(u) / 100) for p, (r, w, kv, u) in phase.items()}


class Exporter:
    def __init__(self):
        self.phase = PHASE_A
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                lines = []
                for pool, (running, waiting, kv, utils) in exporter.phase.items():
                    lab = f'pool="{pool}",model_name="llama-test",engine="0"'
                    lines += [
                        f"vllm:num_requests_running{{{lab}}} {running}",
                        f"vllm:num_requests_waiting{{{lab}}} {waiting}",
                        f"vllm:kv_cache_usage_perc{{{lab}}} {kv}",
                    ]
                    lines += [f'DCGM_FI_DEV_GPU_UTIL{{pool="{pool}",gpu="{i}"}} {u}' for i, u in enumerate(utils)]
                body = ("\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _instant(base, query):
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.loads(r.read())["data"]["result"]
    except OSError:
        return None


def _held_for(base, selector, seconds, value=None):
    """Whether every series of `selector` has newest samples spanning at least `seconds` by Prometheus' own
    timestamps (only the trailing run equal to `value`, when given): what a fixed sleep used to stand for,
    polled on the scrapes themselves, so a loaded machine that scrapes late waits longer instead of failing."""
    series = _instant(base, f"{selector}[1h]")  # a range selector: each series' raw samples
    if not series:
        return False
    for s in series:
        run = s["values"]
        if value is not None:
            tail = len(run)
            while tail and run[tail - 1][1] == value:
                tail -= 1
            run = run[tail:]
        if not run or float(run[-1][0]) - float(run[0][0]) < seconds:
            return False
    return True


def _wait_for(predicate, what, attempts=240):
    """Polls Prometheus, which scrapes every second; fails (not hangs) if it never gets there."""
    for _ in range(attempts):
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"Prometheus never reached: {what}")


@pytest.fixture
def prometheus(tmp_path):
    if not os.path.exists(PROMETHEUS):
        if CI:
            pytest.fail(f"{PROMETHEUS} is missing and CI=true")
        pytest.skip(f"{PROMETHEUS} is not installed")
    exporter = Exporter()
    port = _free_port()
    # honor_labels keeps the exporter's pool label; the target label gives `up` the same pool
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: vllm\n    honor_labels: true\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter.port}']\n        labels: {{pool: pool-a}}\n"
    )
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        yield base, exporter
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        exporter.server.shutdown()
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def _stored(pool):
    return {
        (s.requests_running, s.requests_waiting, s.kv_cache_usage, s.accelerator_util)
        for s in FleetSample.objects.filter(pool__slug=pool, source="prometheus:local")
    }


@pytest.mark.slow
def test_pull_stores_what_the_exporter_served(prometheus, fleet):
    base, exporter = prometheus
    _wait_for(lambda: len(_instant(base, "vllm:num_requests_running") or []) == 2, "phase A scraped")
    # a few more phase-A scrapes, so phase A owns several evaluation instants
    _wait_for(lambda: _held_for(base, "vllm:num_requests_running", 2), "phase A held for 2 s")
    exporter.phase = PHASE_B
    _wait_for(
        lambda: [r["value"][1] for r in _instant(base, 'vllm:num_requests_running{pool="pool-a"}') or []] == ["9"],
        "phase B scraped",
    )
    _wait_for(
        lambda: [r["value"][1] for r in _instant(base, 'DCGM_FI_DEV_GPU_UTIL{pool="pool-b",gpu="1"}') or []] == ["40"],
        "phase B scraped everywhere",
    )
    # phase B owns whole-second evaluation instants before the range ends at "now"
    _wait_for(lambda: _held_for(base, 'vllm:num_requests_running{pool="pool-a"}', 2, "9"), "phase B held for 2 s")
    _wait_for(lambda: _held_for(base, 'DCGM_FI_DEV_GPU_UTIL{pool="pool-b",gpu="1"}', 2, "40"), "phase B held")
    source = PrometheusSource.objects.create(
        name="local", base_url=base, step_s=1, overlap_s=30, initial_lookback_s=120
    )

    assert pull_prometheus_sources.delay().get() == 1

    a, b = _expected(PHASE_A), _expected(PHASE_B)
    for pool in ("pool-a", "pool-b"):
        got = _stored(pool)
        assert got == {a[pool], b[pool]}, pool  # every stored instant is exactly one of the two served states
        newest = FleetSample.objects.filter(pool__slug=pool).order_by("-ts").first()
        assert (newest.requests_running, newest.requests_waiting, newest.kv_cache_usage, newest.accelerator_util) == b[
            pool
        ]
    # `up` carries the target's pool label: one replica target, healthy
    assert latest_pool_health(fleet.pool_a.pk) == (1, 1)
    assert latest_pool_health(fleet.pool_b.pk) is None

    source.refresh_from_db()
    assert source.last_pulled_at is not None and source.claimed_until is None and source.last_error == ""
    count = FleetSample.objects.count()
    before = set(FleetSample.objects.values_list("pool_id", "ts", "requests_running", "kv_cache_usage"))
    # an overlapping re-pull of the same instants changes nothing
    start, _ = pull_window(source, source.last_pulled_at)
    assert start < source.last_pulled_at
    assert pull_prometheus_source.delay(source.pk).get().endswith("samples")
    assert (
        set(
            FleetSample.objects.filter(ts__lte=source.last_pulled_at).values_list(
                "pool_id", "ts", "requests_running", "kv_cache_usage"
            )
        )
        == before
    )
    assert FleetSample.objects.filter(ts__lte=source.last_pulled_at).count() == count


def test_claimed_source_is_skipped(fleet):
    src = PrometheusSource.objects.create(
        name="busy", base_url="http://127.0.0.1:9", claimed_until=timezone.now() + timedelta(minutes=1)
    )
    assert pull_prometheus_source.delay(src.pk).get() == "skipped"
    src.refresh_from_db()
    assert src.last_pulled_at is None


def test_beat_schedule_exists(db):
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(task="telemetry.tasks.pull_prometheus_sources")
    assert (task.interval.every, task.interval.period, task.enabled) == (30, "seconds", True)
