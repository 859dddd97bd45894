"""The Atlas preset (issue 24) against a real Prometheus scraping a stand-in Atlas gateway that exposes
exactly the four counters Atlas documents, by api_key: atlas_requests_total, atlas_tokens_used_total,
atlas_quota_rejections_total, atlas_rate_limit_rejections_total. Keys map to tenants through the
source's CSV (docs/contract.md §8)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ValidationError

from telemetry.atlas_map import parse_atlas_map
from telemetry.models import GatewayUsageSample, PrometheusSource, default_queries
from telemetry.prom_presets import queries_of
from telemetry.prometheus import pull_source
from tests.telemetry.test_prometheus_pull import CI, PROMETHEUS, _free_port, _held_for, _instant, _wait_for

T0 = time.time()

# api_key → per-second (requests, tokens, quota rejections, rate-limit rejections)
KEYS = {
    "ak-acme-1": (4, 400, 0.5, 1),
    "ak-acme-2": (2, 100, 0, 0.25),  # same owner as ak-acme-1: summed into one row
    "ak-globex": (3, 900, 0.2, 0),
    "ak-stray": (7, 70, 0, 0),  # not in the map: reported, not stored
}
MAP = """api_key,tenant,project,model,region
ak-acme-1,acme,,llama-70b,eu-west
ak-acme-2,acme,,llama-70b,eu-west
# globex's one key
ak-globex,globex,,llama-70b,us-east
"""
NAMES = ("atlas_requests_total", "atlas_tokens_used_total", "atlas_quota_rejections_total",
         "atlas_rate_limit_rejections_total")  # fmt: skip


class Gateway:
    """A stand-in Atlas: every counter grows linearly with time, so its rate is known."""

    def __init__(self, keys: dict[str, tuple[float, ...]]):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                t = time.time() - T0
                lines = [
                    f'{name}{{api_key="{key}"}} {per_s[i] * t}'
                    for key, per_s in keys.items()
                    for i, name in enumerate(NAMES)
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
def atlas_prometheus(tmp_path):
    if not os.path.exists(PROMETHEUS):
        if CI:
            pytest.fail(f"{PROMETHEUS} is missing and CI=true")
        pytest.skip(f"{PROMETHEUS} is not installed")
    gateway = Gateway(KEYS)
    other = Gateway({"ak-acme-1": (1000, 1000, 1000, 1000)})  # another job's series: never counted
    port = _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: atlas\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{gateway.port}']\n"
        "  - job_name: other\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{other.port}']\n"
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
        gateway.server.shutdown()
        other.server.shutdown()
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def test_the_map_refuses_each_bad_line_by_number_and_keeps_the_good_ones(fleet):
    owners, errors = parse_atlas_map(
        "api_key,tenant,project,model,region\n"
        "ak-1,acme,,llama-70b,eu-west\n"
        "ak-2,acme,eu-west\n"  # line 3: four columns missing one
        "ak-1,globex,,m,r\n"  # line 4: the key again
        "ak-3,nobody,,m,r\n"  # line 5: no such tenant
        ",acme,,m,r\n"  # line 6: no key
        "ak-4,globex,,m,r\n"
    )
    assert set(owners) == {"ak-1", "ak-4"}
    assert owners["ak-1"].tenant == "acme" and owners["ak-4"].tenant == "globex"
    assert [e.split(":")[0] for e in errors] == ["line 3", "line 4", "line 5", "line 6"]
    assert "row: expected 5 columns" in errors[0] and "already mapped on line 2" in errors[1]
    assert "tenant: 'nobody' does not exist" in errors[2] and "api_key: is empty" in errors[3]


def test_the_atlas_preset_is_checked_on_save_and_reads_the_four_counters(fleet):
    source = PrometheusSource(name="a", base_url="http://x", preset="atlas", atlas_map="ak-1,acme,,m,r\nak-2,acme\n")
    with pytest.raises(ValidationError) as bad:
        source.clean()
    assert bad.value.message_dict == {
        "atlas_map": ["line 2: row: expected 5 columns api_key,tenant,project,model,region, got 2"]
    }
    source.atlas_map = ""
    with pytest.raises(ValidationError) as bad:
        source.clean()
    assert "atlas_map" in bad.value.message_dict
    source.atlas_map = MAP
    source.clean()
    q = queries_of(source)
    assert q["tokens"] == 'sum by (api_key) (rate(atlas_tokens_used_total{job="atlas"}[1m]))'
    assert set(q) == {"requests", "tokens", "quota_rejections", "rate_limit_rejections"}


def test_the_admin_refuses_a_bad_map_line_on_the_field_and_stores_nothing(fleet):
    from tests.clients import web_client
    from tests.factories import UserFactory

    admin = web_client(UserFactory(username="root", is_staff=True, is_superuser=True))
    form = {"name": "atlas", "base_url": "http://127.0.0.1:9090", "enabled": "on", "preset": "atlas", "job": "",
            "rate_window": "1m", "pool_label": "pool", "queries": json.dumps(default_queries()), "step_s": "15", "overlap_s": "120",
            "initial_lookback_s": "600", "atlas_map": MAP + "ak-9,acme,,m\n"}  # fmt: skip
    resp = admin.post("/admin/telemetry/prometheussource/add/", form)
    assert resp.status_code == 200
    assert resp.context["adminform"].form.errors["atlas_map"] == [
        "line 6: row: expected 5 columns api_key,tenant,project,model,region, got 4"
    ]
    assert not PrometheusSource.objects.exists()
    form["atlas_map"] = MAP
    saved = admin.post("/admin/telemetry/prometheussource/add/", form)
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    assert PrometheusSource.objects.get(name="atlas").atlas_map.replace("\r\n", "\n") == MAP.strip()
    assert admin.get("/admin/telemetry/gatewayusagesample/").status_code == 200


@pytest.mark.slow
def test_atlas_preset_stores_usage_per_tenant_and_reports_unmapped_keys(atlas_prometheus, fleet):
    base = atlas_prometheus
    q = 'sum by (api_key) (rate(atlas_requests_total{job="atlas"}[5s]))'
    _wait_for(lambda: len(_instant(base, q) or []) == len(KEYS), "every key with a rate")
    # more scrapes than the 5 s rate window, so the newest instants have whole windows
    _wait_for(lambda: _held_for(base, 'atlas_requests_total{job="atlas"}', 8), "8 s of scrapes")
    source = PrometheusSource.objects.create(
        name="atlas", base_url=base, preset="atlas", job="atlas", rate_window="5s", step_s=2, overlap_s=30,
        initial_lookback_s=20, atlas_map=MAP,
    )  # fmt: skip
    result = pull_source(source)
    assert result.errors == []
    # every row the pull reports is stored (one per owner and step: acme's two keys are one row)
    assert result.samples == GatewayUsageSample.objects.count()
    steps = set(GatewayUsageSample.objects.values_list("ts", flat=True))
    per_owner = {t: GatewayUsageSample.objects.filter(tenant__slug=t).count() for t in ("acme", "globex")}
    assert per_owner == {"acme": len(steps), "globex": len(steps)}  # both owners at every step the pull read
    assert result.unmapped_keys == {"ak-stray"}
    source.refresh_from_db()
    assert "ak-stray" in source.last_error
    assert set(GatewayUsageSample.objects.values_list("tenant__slug", flat=True)) == {"acme", "globex"}

    def newest(tenant):
        return GatewayUsageSample.objects.filter(tenant__slug=tenant).order_by("-ts").first()

    acme, globex = newest("acme"), newest("globex")
    assert (acme.model, acme.region, globex.region) == ("llama-70b", "eu-west", "us-east")
    # counts per 2 s step: the two acme keys summed, the other job's 1000/s never counted
    assert acme.requests == pytest.approx(2 * 6, rel=0.1)
    assert acme.tokens == pytest.approx(2 * 500, rel=0.1)
    assert acme.quota_rejections == pytest.approx(2 * 0.5, rel=0.1)
    assert acme.rate_limit_rejections == pytest.approx(2 * 1.25, rel=0.1)
    assert globex.requests == pytest.approx(2 * 3, rel=0.1)
    assert globex.tokens == pytest.approx(2 * 900, rel=0.1)
    assert (globex.quota_rejections, globex.rate_limit_rejections) == (pytest.approx(2 * 0.2, rel=0.1), 0)
    # the counters move together, so their ratios are exact whatever the scrape jitter
    assert acme.tokens / acme.requests == pytest.approx(500 / 6, rel=1e-3)
    assert globex.tokens / globex.requests == pytest.approx(300, rel=1e-3)

    before = GatewayUsageSample.objects.filter(ts__gte=result.start).count()
    source.refresh_from_db()
    again = pull_source(source, now=result.end)  # the overlap re-reads the same steps: overwritten, not added
    assert again.samples >= before
    assert GatewayUsageSample.objects.filter(ts__gte=result.start).count() == before
