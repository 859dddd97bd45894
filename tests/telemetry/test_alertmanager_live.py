"""Real Debian Prometheus evaluates Hyperion-style rules on a stand-in exporter and real Debian
Alertmanager posts the alerts to Headroom's live server (issue 24): a load alert is kept as evidence,
ServiceDown (`up == 0`) takes the replica out of the pool's health until it resolves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from admission.snapshot_reads import pool_health
from entitlements.models import ApiToken
from telemetry.models import PoolAlert
from tests.factories import platform_user
from tests.telemetry.test_prometheus_pull import CI, PROMETHEUS, _free_port, _instant

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"

# Hyperion's public rule names, written here in the same style (not copied from anywhere).
RULES = """groups:
  - name: hyperion
    rules:
      - alert: ServiceDown
        expr: up{job="hyperion"} == 0
        labels: {severity: critical}
        annotations: {summary: "Hyperion replica {{ $labels.instance }} is down"}
      - alert: GPUMemoryHigh
        expr: gpu_memory_allocated_bytes / gpu_memory_total_bytes > 0.9
        labels: {severity: warning}
        annotations: {summary: "GPU memory above 90 %"}
"""


class Hyperion:
    """A stand-in inference server's /metrics: GPU memory, and a switch that makes scrapes fail (up == 0)."""

    def __init__(self):
        self.allocated = 0.95
        self.down = False
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if me.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                body = (
                    f'gpu_memory_allocated_bytes{{gpu="0"}} {me.allocated * 80e9}\n'
                    'gpu_memory_total_bytes{gpu="0"} 80e9\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _needs(path):
    if not os.path.exists(path):
        if CI:
            pytest.fail(f"{path} is missing and CI=true")
        pytest.skip(f"{path} is not installed")


@pytest.fixture
def stack(tmp_path, live_server, fleet):
    _needs(PROMETHEUS)
    _needs(ALERTMANAGER)
    _, key = ApiToken.issue(platform_user("alertmanager", "gateway"), name="alertmanager")
    hyperion = Hyperion()
    am_port, prom_port = _free_port(), _free_port()
    (tmp_path / "am.yml").write_text(
        "route:\n  receiver: headroom\n  group_by: [alertname, pool]\n"
        "  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n"
        "receivers:\n  - name: headroom\n    webhook_configs:\n"
        f"      - url: {live_server.url}/api/v1/telemetry/alertmanager\n        send_resolved: true\n"
        f"        http_config: {{authorization: {{type: Bearer, credentials: '{key}'}}}}\n"
    )
    (tmp_path / "rules.yml").write_text(RULES)
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: ['{tmp_path / 'rules.yml'}']\n"
        f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n"
        "scrape_configs:\n  - job_name: hyperion\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{hyperion.port}']\n        labels: {{pool: pool-a}}\n"
    )
    procs = [
        subprocess.Popen(
            [ALERTMANAGER, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--rules.alert.resend-delay=1s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ),
    ]  # fmt: skip
    try:
        yield f"http://127.0.0.1:{prom_port}", hyperion
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        hyperion.server.shutdown()
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def _until(predicate, what, attempts=480):
    """Polls what Headroom stored; fails (not hangs) if the chain never delivers."""
    for _ in range(attempts):
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"never happened: {what}")


def _states(name):
    return sorted(PoolAlert.objects.filter(alertname=name).values_list("state", flat=True))


@pytest.mark.slow
def test_alerts_fire_and_resolve_through_alertmanager(stack, fleet):
    prom, hyperion = stack
    pool = fleet.pool_a.pk
    _until(lambda: _states("GPUMemoryHigh") == ["firing"], "GPUMemoryHigh delivered firing")
    alert = PoolAlert.objects.get(alertname="GPUMemoryHigh")
    assert (alert.pool_id, alert.kind, alert.labels["severity"]) == (pool, "load", "warning")
    assert pool_health(pool, {}) is None  # load is evidence only

    hyperion.down = True  # the replica stops answering: up == 0, and its memory series go away
    _until(lambda: _states("ServiceDown") == ["firing"], "ServiceDown delivered firing")
    down = PoolAlert.objects.get(alertname="ServiceDown")
    assert (down.pool_id, down.kind, down.labels["instance"]) == (pool, "supply", f"127.0.0.1:{hyperion.port}")
    assert "up" in down.generator_url
    assert pool_health(pool, {}) == (3, 4)  # pool-a has 4 replicas and no fleet sample: one is down
    _until(lambda: _states("GPUMemoryHigh") == ["resolved"], "GPUMemoryHigh delivered resolved")

    hyperion.down, hyperion.allocated = False, 0.5
    _until(lambda: _states("ServiceDown") == ["resolved"], "ServiceDown delivered resolved")
    assert pool_health(pool, {}) is None
    assert PoolAlert.objects.get(alertname="ServiceDown").ends_at is not None
    assert _instant(prom, 'ALERTS{alertstate="firing"}') == []
