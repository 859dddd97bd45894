"""The Hyperion preset (issue 24) against a real Prometheus scraping stand-in Hyperion replicas that expose
exactly the names Hyperion documents: up, http_requests_total, gpu_memory_*_bytes, and the
batch_wait_time_seconds / model_inference_duration_seconds histograms."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ValidationError

from telemetry.models import FleetSample, PrometheusSource
from telemetry.prom_presets import queries_of
from telemetry.prometheus import pull_source
from tests.telemetry.test_prometheus_pull import CI, PROMETHEUS, _free_port, _instant, _wait_for

T0 = time.time()


class Replica:
    """One stand-in Hyperion replica: counters grow linearly with time, so their rates are known."""

    def __init__(self, chat_rps, wait_s, infer_s, mem, down=False):
        me = self
        self.down = down

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if me.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                t = time.time() - T0
                lines = [
                    f'http_requests_total{{path="/v1/llm/chat",code="200"}} {chat_rps * t}',
                    f'http_requests_total{{path="/health",code="200"}} {100 * t}',  # not chat: not throughput
                    f'gpu_memory_allocated_bytes{{gpu="0"}} {mem * 80e9}',
                    'gpu_memory_total_bytes{gpu="0"} 80e9',
                    f"batch_wait_time_seconds_sum {wait_s * 10 * t}",
                    f"batch_wait_time_seconds_count {10 * t}",
                    f'batch_wait_time_seconds_bucket{{le="+Inf"}} {10 * t}',
                    f"model_inference_duration_seconds_sum {infer_s * 4 * t}",
                    f"model_inference_duration_seconds_count {4 * t}",
                    f'model_inference_duration_seconds_bucket{{le="+Inf"}} {4 * t}',
                ]
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


@pytest.fixture
def hyperion_prometheus(tmp_path):
    if not os.path.exists(PROMETHEUS):
        if CI:
            pytest.fail(f"{PROMETHEUS} is missing and CI=true")
        pytest.skip(f"{PROMETHEUS} is not installed")
    replicas = {
        "a1": (Replica(5, 0.2, 1.5, 0.75), "pool-a"),
        "a2": (Replica(5, 0.2, 1.5, 0.75, down=True), "pool-a"),  # never up: up == 0, no series
        "b1": (Replica(2, 0.05, 0.5, 0.5), "pool-b"),
        "x1": (Replica(50, 9, 9, 0.99), "pool-b"),  # another job: not Hyperion's, never counted
    }
    targets = "".join(
        f"      - targets: ['127.0.0.1:{r.port}']\n        labels: {{pool: {pool}}}\n"
        for name, (r, pool) in replicas.items()
        if name != "x1"
    )
    port = _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n"
        f"scrape_configs:\n  - job_name: hyperion\n    static_configs:\n{targets}"
        "  - job_name: other\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{replicas['x1'][0].port}']\n        labels: {{pool: pool-b}}\n"
    )
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for r, _ in replicas.values():
            r.server.shutdown()
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def test_the_hyperion_preset_reads_those_names_by_job_and_pool(fleet):
    source = PrometheusSource(name="h", base_url="http://x", preset="hyperion", job="hyperion")
    q = queries_of(source)
    assert q["throughput_rps"] == ('sum by (pool) (rate(http_requests_total{job="hyperion",path="/v1/llm/chat"}[1m]))')
    assert q["replicas_total"] == 'count by (pool) (up{job="hyperion"})'
    assert set(q) == {"replicas_healthy", "replicas_total", "throughput_rps", "accelerator_memory",
                      "queue_wait_s", "latency_s"}  # fmt: skip
    source.rate_window = "a minute"
    with pytest.raises(ValidationError) as bad:
        source.clean()
    assert "rate_window" in bad.value.message_dict
    source.rate_window, source.job = "30s", 'x"}'
    with pytest.raises(ValidationError) as bad:
        source.clean()
    assert "job" in bad.value.message_dict
    source.preset = "custom"
    source.queries = {"requests_running": "x"}
    assert queries_of(source) == {"requests_running": "x"}


@pytest.mark.slow
def test_hyperion_preset_stores_fleet_samples_of_each_pool(hyperion_prometheus, fleet):
    base = hyperion_prometheus
    q = 'sum by (pool) (rate(model_inference_duration_seconds_count{job="hyperion"}[1m]))'
    _wait_for(lambda: len(_instant(base, q) or []) == 2, "two pools with rates")
    _wait_for(lambda: len(_instant(base, 'up{job="hyperion"} == 0') or []) == 1, "the down replica seen")
    time.sleep(7)  # more scrapes than the 5 s rate window, so the newest instants have whole windows
    source = PrometheusSource.objects.create(
        name="hyperion", base_url=base, preset="hyperion", job="hyperion", rate_window="5s", step_s=1,
        overlap_s=30, initial_lookback_s=20,
    )  # fmt: skip
    result = pull_source(source)
    assert result.errors == [] and result.samples > 0

    def newest(pool):
        return FleetSample.objects.filter(pool__slug=pool, source="prometheus:hyperion").order_by("-ts").first()

    a, b = newest("pool-a"), newest("pool-b")
    assert (a.replicas_healthy, a.replicas_total) == (1, 2)
    assert (b.replicas_healthy, b.replicas_total) == (1, 1)  # the other job's target is not a replica
    assert a.throughput_rps == pytest.approx(5, rel=0.1)  # /health's 100/s is not chat
    assert b.throughput_rps == pytest.approx(2, rel=0.1)
    assert (a.accelerator_memory, b.accelerator_memory) == (0.75, 0.5)
    assert (a.queue_wait_s, b.queue_wait_s) == (pytest.approx(0.2, rel=1e-3), pytest.approx(0.05, rel=1e-3))
    assert (a.latency_s, b.latency_s) == (pytest.approx(1.5, rel=1e-3), pytest.approx(0.5, rel=1e-3))
