"""The one-Redis outage through gunicorn (2 workers × 4 threads): one throwaway redis-server is the
Django cache, the admission store and the Celery broker; it is SIGKILLed under load from gateway
threads and restarted empty (issue 29, docs/serving-path-faults.md). Every answer is one of the
documented fail modes, no 5xx but the documented complete 503, and every decision answered is an
event: on the restarted broker's admission-events queue (flushed by the workers as they stop) or
dead-lettered in the database."""

from __future__ import annotations

import base64
import http.client
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from admission.sinks import STAGE
from entitlements import token_services
from entitlements.models import ApiToken
from telemetry.models import DeadLetter
from tests.admission.world import body, build_world, grant
from tests.servers import child_db_env, free_port
from tests.servers.redis import RedisServer

ROOT = Path(__file__).resolve().parents[2]
CLASSES = [("acme", "reserved"), ("globex", "shared"), ("globex", "best_effort")]
PER_PHASE = 60  # answers per phase


class Gateway:
    """Gateway threads on keep-alive connections; each answer is kept with the phase it was sent in."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.phase = "up"
        self.answers: list[tuple[str, str, str, str, int, dict]] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def post(self, conn: http.client.HTTPConnection, path: str, doc: dict) -> tuple[int, dict]:
        conn.request("POST", path, json.dumps(doc), {"Authorization": f"Token {self.key}",
                                                     "Content-Type": "application/json"})  # fmt: skip
        r = conn.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, {"error": {"code": f"not JSON: {raw[:80]!r}"}}

    def run(self, n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        i = 0
        while not self.stop.is_set():
            for tenant, cls in CLASSES:
                phase, rid = self.phase, f"{self.phase}-{n}-{i}-{cls}"
                status, doc = self.post(conn, "/api/v1/admission/reserve", body(tenant, cls, rid, prompt=20, out=20))
                with self.lock:  # sent in one phase and answered in another: an edge, not either
                    self.answers.append((phase if self.phase == phase else "edge", "reserve", cls, rid, status, doc))
                if status == 200:
                    done = {"reservation_id": doc["reservation_id"], "prompt_tokens": 20, "output_tokens": 5,
                            "status": "ok"}  # fmt: skip
                    status, d = self.post(conn, "/api/v1/admission/complete", done)
                    with self.lock:
                        self.answers.append((phase if self.phase == phase else "edge", "complete", cls, rid, status, d))
            i += 1

    def wait_for(self, phase: str, n: int, what: object = None) -> None:
        for _ in range(20_000):  # a hang guard, not a timing assertion
            got = [a for a in self.answers if a[0] == phase and (what is None or what(a))]
            if len(got) >= n:
                return
            time.sleep(0.01)
        pytest.fail(f"phase {phase}: fewer than {n} answers")


def _broker_events(server: RedisServer) -> set[str]:
    ids = set()
    for raw in server.client().lrange("admission-events", 0, -1):
        msg = json.loads(raw)
        args = json.loads(base64.b64decode(msg["body"]))[0]
        ids |= {e["event_id"] for e in args[0]}
    return ids


@pytest.mark.redis
@pytest.mark.slow
def test_gunicorn_with_one_redis_killed_under_load(transactional_db, fleet, tmp_path):
    w = build_world(fleet)
    grant(fleet, w.pool, fleet.globex, "0.01", "shared")
    gw = ApiToken.objects.get(user__username="gw").user
    _, key = token_services.token_create(actor=gw, name="litellm", scope="gateway")
    server = RedisServer(tmp_path)
    server.start()
    port = free_port()
    env = {**child_db_env(), "DJANGO_SETTINGS_MODULE": "config.settings",
           "REDIS_URL": server.url, "CELERY_BROKER_URL": server.url, "ADMISSION_REDIS_TIMEOUT_S": "0.2",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"), "HEADROOM_SIMULATE": "0",
           "ADMISSION_SWEEP_IN_PROCESS": "0"}  # fmt: skip
    log = (tmp_path / "gunicorn.log").open("w")
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--threads", "4"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    gate = Gateway(port, key)
    threads = [threading.Thread(target=gate.run, args=(n,)) for n in range(4)]
    try:
        for _ in range(1200):  # up to ~2 min for gunicorn to boot on a busy machine: a hang guard
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=5).request("GET", "/login/")
                break
            except OSError:
                assert web.poll() is None, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.1)
        for t in threads:
            t.start()
        gate.wait_for("up", PER_PHASE)
        gate.phase = "dying"
        server.kill()
        gate.phase = "down"  # what was sent before this and answered after is an edge
        gate.wait_for("down", PER_PHASE)
        gate.phase = "restarting"
        server.start()  # empty: no data, no scripts, no token epoch, no queued events
        gate.phase = "back"
        gate.wait_for("back", PER_PHASE, lambda a: a[5].get("source") == "entitlement")
    finally:
        gate.stop.set()
        for t in threads:
            t.join()
        web.send_signal(signal.SIGTERM)  # the workers flush their buffered events as they exit
        web.wait(timeout=120)  # a hang guard
    try:
        events = _broker_events(server)
    finally:
        server.stop()
    for row in DeadLetter.objects.filter(stage=STAGE):
        events |= {e["event_id"] for e in row.payload}

    fives = [a for a in gate.answers if a[4] >= 500]
    print(Counter((a[0], a[1], a[4]) for a in gate.answers), f"events {len(events)}")
    assert all(a[1] == "complete" and a[4] == 503 and a[5]["error"]["code"] == "ADMISSION_UNAVAILABLE"
               for a in fives), fives[:5]  # fmt: skip
    down = [a for a in gate.answers if a[0] == "down"]
    assert {(a[2], a[4], a[5].get("source") or a[5].get("reason")) for a in down if a[1] == "reserve"} == {
        ("reserved", 200, "fail_open"), ("shared", 200, "fail_open"), ("best_effort", 429, "ADMISSION_UNAVAILABLE"),
    }  # fmt: skip
    missing = [a[:5] for a in gate.answers if (a[3] if a[1] == "reserve" else f"{a[3]}:complete") not in events]
    assert missing == []
