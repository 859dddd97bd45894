"""/metrics: an allow-listed address or an operator's or gateway's token, and counters that add up
across worker processes (prometheus_client multiprocess mode, as config/gunicorn.py runs it)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rest_framework.test import APIClient

from entitlements.models import ApiToken
from tests.factories import member, platform_user

OUTSIDE = "203.0.113.9"


def _get(addr: str, key: str | None = None) -> int:
    c = APIClient(REMOTE_ADDR=addr)
    if key:
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return c.get("/metrics").status_code


def test_loopback_is_allowed_by_default_and_others_need_a_token(fleet):
    assert _get("127.0.0.1") == 200
    assert _get("::1") == 200
    assert _get(OUTSIDE) == 401
    _, op_key = ApiToken.issue(fleet.operator)
    _, gw_key = ApiToken.issue(platform_user("gw", "gateway"))
    _, viewer_key = ApiToken.issue(member("v", fleet.acme, "viewer"))
    assert (_get(OUTSIDE, op_key), _get(OUTSIDE, gw_key), _get(OUTSIDE, viewer_key)) == (200, 200, 403)
    assert _get(OUTSIDE, "not-a-key") == 401


def test_a_forwarded_for_header_does_not_get_in(fleet):
    c = APIClient(REMOTE_ADDR=OUTSIDE)
    assert c.get("/metrics", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 401


def test_allowed_addresses_are_a_setting(fleet, settings):
    settings.METRICS_ALLOWED_IPS = "10.1.0.0/16, 192.0.2.7"
    assert (_get("10.1.2.3"), _get("192.0.2.7"), _get("10.2.0.1"), _get("127.0.0.1")) == (200, 200, 401, 401)


COUNT_IN_A_WORKER = "from telemetry import metrics; metrics.INGESTED.labels('mp-test').inc({n})"


@pytest.mark.django_db
def test_counters_add_up_across_processes(tmp_path, monkeypatch):
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for n in (5, 7):  # two "workers", each its own process
        subprocess.run([sys.executable, "-c", COUNT_IN_A_WORKER.format(n=n)], env=env, check=True, cwd=".")
    line = 'headroom_ingested_events_total{source="mp-test"} 12.0'
    # One process's registry alone knows nothing of the others (what /metrics said before):
    assert line not in APIClient().get("/metrics").content.decode()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert line in APIClient().get("/metrics").content.decode()
