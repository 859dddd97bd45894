"""The LiteLLM proxy plug-in end to end (issue 37.1): a real `litellm` proxy process with
integrations/litellm/headroom_callback.py, in front of a real OpenAI-compatible upstream process
(tests/integrations/upstream.py), against the live portal (Django's live server: the admission
API, the snapshot, the events API).

- A sequence of requests through LiteLLM gets exactly the decisions (status, reason, Retry-After)
  that the same requests sent to `POST /api/v1/admission/reserve` get, with the same completes,
  in HTTP mode and (with Redis) in library mode.
- Every admitted request is settled with the upstream's `usage`, streams included; a stream the
  client leaves is settled `cancelled`.
- Negative control: the same proxy without the callback serves the same request and no admission
  event exists.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from rest_framework.test import APIClient

from admission import backends, events, params
from admission.backends.memory import MemoryBackend
from admission.backends.redis import RedisBackend
from entitlements import models as m
from telemetry.models import AdmissionEvent
from tests import factories as f
from tests.admission import cluster
from tests.admission.world import build_world
from tests.integrations import stack

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# LiteLLM keys (custom auth: the proxy has no database here), one per path of the tenant mapping.
KEYS = {
    "sk-acme": {"team_id": "team-1", "team_alias": "acme", "metadata": {"headroom_traffic_class": "reserved"}},
    "sk-globex": {
        "team_id": "team-2",
        "team_metadata": {"headroom_tenant": "globex", "headroom_traffic_class": "best_effort"},
    },  # fmt: skip
    "sk-nobody": {"metadata": {"headroom_tenant": "nobody", "headroom_traffic_class": "shared"}},
    "sk-no-tenant": {"metadata": {}},
}
KEY_SCOPE = {"sk-acme": ("acme", "reserved"), "sk-globex": ("globex", "best_effort"),
             "sk-nobody": ("nobody", "shared")}  # fmt: skip

# (step, key, model group, max_tokens); a request weighs prompt + 4 × max_tokens (tests/admission/world.py).
# acme reserved: ~8 + 4 × 990 ≈ 3,970 wt each; its bucket holds 12,000 and refills 200 wt/s, so r4 is
# refused unless ~19 s passed since r1. The pool (16,800, refilling 280 wt/s) has ~3,800 left after g1;
# g2 (~2,900 wt: more than globex's own 2,000, so borrowed) would take it under its reclaim margin
# (3,360) unless ~8.6 s passed since r1: RECLAIMED. r1-r3 go at once (three threads), so g2 is
# decided a second or two after them through LiteLLM, at once directly.
STEPS = [
    ("r1", "sk-acme", "llama-test", 990),
    ("r2", "sk-acme", "llama-test", 990),
    ("r3", "sk-acme", "llama-test", 990),
    ("g1", "sk-globex", "llama-test", 248),  # ~1,000 wt from globex's own bucket
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
# Telemetry refuses (dead-letters) events of an unknown tenant or region: these two never arrive.
NO_EVENT = {"n1", "p1"}
WAIT_GUARD_S = 120  # events reach the portal within ~1 s; a hang guard, not a timing assertion


@pytest.fixture
def portal(live_server, fleet):
    """The live portal with the tiny world on a fresh in-process store, and a gateway token."""
    world = build_world(fleet)
    prev = backends.set_backend(MemoryBackend())
    params.invalidate()
    user = f.UserFactory(username="gw-litellm")
    m.PlatformRole.objects.get_or_create(user=user, role="gateway")
    _, token = m.ApiToken.issue(user)
    yield live_server.url, token, world
    backends.set_backend(prev)
    params.invalidate()


@pytest.fixture
def upstream(tmp_path):
    with stack.upstream(tmp_path) as up:
        yield up


def ask(gw_url: str, key: str, tag: str, model: str, max_tokens: int, *, run: str, stream: bool = False,
        extra: str = "") -> httpx.Response:  # fmt: skip
    body = {"model": model, "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": f"please answer id:{run}-{tag} {extra}".strip()}]}  # fmt: skip
    if stream:
        body["stream_options"] = {"include_usage": True}
    headers = {"Authorization": f"Bearer {key}", "x-litellm-call-id": f"{run}-{tag}"}
    return httpx.post(gw_url + "/v1/chat/completions", json=body, headers=headers, timeout=120)


def through_litellm(gw_url: str, run: str) -> list[tuple]:
    with ThreadPoolExecutor(3) as pool:  # r1-r3 together: all admitted, whatever their order
        first = list(pool.map(lambda st: ask(gw_url, st[1], st[0], st[2], st[3], run=run), STEPS[:3]))
    out = []
    for i, (tag, key, model, max_tokens) in enumerate(STEPS):
        r = first[i] if i < 3 else ask(gw_url, key, tag, model, max_tokens, run=run)
        reason = r.headers.get("x-headroom-reason")
        if r.status_code == 429:  # LiteLLM's own rate-limit error, naming Headroom's reason
            err = r.json()["error"]
            assert err["type"] == "throttling_error" and f"Headroom: {reason} (" in err["message"], err
        else:
            assert reason is None
        out.append((r.status_code, reason, r.headers.get("retry-after") is not None))
    return out


def reserve_events(source: str, run: str) -> dict[str, AdmissionEvent]:
    return {e.event_id: e for e in AdmissionEvent.objects.filter(source=source, event_id__startswith=f"{run}-")}


def wait_for_events(source: str, run: str, want: set[str], flush) -> dict[str, AdmissionEvent]:
    """The run's events once every id in `want` is there (or the hang guard ran out)."""
    deadline = time.monotonic() + WAIT_GUARD_S
    got: dict[str, AdmissionEvent] = {}
    while time.monotonic() < deadline:
        flush()
        got = reserve_events(source, run)
        if want <= got.keys():
            return got
        time.sleep(0.2)
    return got


def directly(token: str, run: str, evs: dict[str, AdmissionEvent], usage: dict[str, dict]) -> list[tuple]:
    """The same requests to `POST /api/v1/admission/reserve` (prompt tokens as LiteLLM counted them,
    read from the events), each admitted one completed with the upstream's usage, on a fresh store."""
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    prev = backends.set_backend(MemoryBackend())
    params.invalidate()
    out = []
    try:
        for tag, key, model, max_tokens in STEPS:
            tenant, cls = KEY_SCOPE.get(key, ("acme", "reserved"))
            ev = evs.get(f"{run}-{tag}") or evs[f"{run}-r1"]  # NOT_ENTITLED, PLACEMENT: decided before any count
            region = "nowhere" if model == "llama-elsewhere" else "tiny-region"
            body = {"request_id": f"direct-{run}-{tag}", "tenant": tenant, "model": "llama-test", "region": region,
                    "traffic_class": cls, "prompt_tokens": ev.prompt_tokens, "max_output_tokens": max_tokens}  # fmt: skip
            r = c.post("/api/v1/admission/reserve", body, format="json")
            d = r.json()
            out.append((r.status_code, d.get("reason"), r.headers.get("Retry-After") is not None))
            if r.status_code == 200:
                u = usage[f"{run}-{tag}"]["usage"]
                done = c.post("/api/v1/admission/complete", {"reservation_id": d["reservation_id"],
                              "prompt_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
                              "status": "ok"}, format="json")  # fmt: skip
                assert done.status_code == 200, done.content
    finally:
        backends.set_backend(prev)
        params.invalidate()
    return out


def check_mode(gw_url: str, token: str, workdir: Path, source: str, flush) -> None:
    run = uuid.uuid4().hex[:6]
    got = through_litellm(gw_url, run)
    assert got == EXPECTED
    # Every step was decided by Headroom (an event each); every admitted one settled with the upstream's usage.
    admitted = [tag for (tag, *_), (status, *_) in zip(STEPS, got, strict=True) if status == 200]
    want = {f"{run}-{t}" for t, *_ in STEPS if t not in NO_EVENT} | {f"{run}-{t}:complete" for t in admitted}
    evs = wait_for_events(source, run, want, flush)
    assert want <= evs.keys(), sorted(want - evs.keys())
    usage = stack.upstream_log(workdir)
    assert sorted(k for k in usage if k.startswith(run)) == sorted(
        f"{run}-{t}" for t in admitted
    )  # no throttled call reached it
    for tag in admitted:
        done = evs[f"{run}-{tag}:complete"]
        u = usage[f"{run}-{tag}"]["usage"]
        assert (done.status, done.prompt_tokens, done.output_tokens) == (
            "ok",
            u["prompt_tokens"],
            u["completion_tokens"],
        )
        assert evs[f"{run}-{tag}"].prompt_tokens != u["prompt_tokens"]  # reserved on LiteLLM's count, settled on usage
    throttled = {e.reason for e in evs.values() if e.decision == "throttle"}
    assert throttled == {r for _, r, _ in EXPECTED if r} - {"NOT_ENTITLED", "PLACEMENT"}
    # The same requests straight to the admission API decide the same.
    assert directly(token, run, evs, usage) == got


def check_streams(gw_url: str, workdir: Path, source: str, flush) -> None:
    run = uuid.uuid4().hex[:6]
    # A stream that runs to its end: settled with the usage of the upstream's last chunk.
    r = ask(gw_url, "sk-acme", "s1", "llama-test", 300, run=run, stream=True, extra="short:37")
    assert r.status_code == 200 and r.text.count('"content"') >= 37, r.text[:500]
    # A stream the client leaves after 5 chunks (the upstream paces 50 ms per token): settled cancelled.
    body = {"model": "llama-test", "max_tokens": 400, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"long answer id:{run}-s2 delay:50"}]}  # fmt: skip
    seen = 0
    with httpx.stream("POST", gw_url + "/v1/chat/completions", json=body, timeout=120,
                      headers={"Authorization": "Bearer sk-acme", "x-litellm-call-id": f"{run}-s2"}) as s:  # fmt: skip
        assert s.status_code == 200
        for line in s.iter_lines():
            seen += line.startswith("data: ")
            if seen == 5:
                break
    evs = wait_for_events(source, run, {f"{run}-s1", f"{run}-s1:complete", f"{run}-s2", f"{run}-s2:complete"}, flush)
    up = stack.upstream_log(workdir)[f"{run}-s1"]
    done = evs[f"{run}-s1:complete"]
    assert (done.status, done.prompt_tokens, done.output_tokens) == ("ok", up["usage"]["prompt_tokens"], 37)
    cut = evs[f"{run}-s2:complete"]
    admit = evs[f"{run}-s2"]
    assert cut.status == "cancelled", (cut.status, cut.output_tokens)
    assert cut.prompt_tokens == admit.prompt_tokens and 5 <= cut.output_tokens < 400


def test_http_mode_decides_as_the_admission_api_and_settles_the_upstreams_usage(portal, upstream, tmp_path):
    url, token, _ = portal
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_TIMEOUT_S": "30"}
    with stack.litellm_proxy(tmp_path, upstream.url, hook=True, env=env, keys=KEYS) as gw:
        flush = events.buffer().flush
        check_mode(gw.url, token, tmp_path, "admission", flush)
        backends.set_backend(MemoryBackend())  # full buckets again for the streams
        check_streams(gw.url, tmp_path, "admission", flush)
        # A key that names no tenant is refused, never served unmetered.
        r = ask(gw.url, "sk-no-tenant", "x", "llama-test", 5, run="none")
        assert r.status_code == 403 and "tenant" in r.text
        # Retry-After and the party responsible on a throttle, as the admission API answers them.
        run = uuid.uuid4().hex[:6]
        assert ask(gw.url, "sk-acme", "q1", "llama-test", 1990, run=run).status_code == 200  # ~8,000 of 12,000
        r = ask(gw.url, "sk-acme", "q2", "llama-test", 1990, run=run)
        assert (
            r.status_code == 429
            and r.headers["x-headroom-reason"] == "QUOTA_EXCEEDED"
            and int(r.headers["retry-after"]) >= 1
        )
        assert r.headers["x-headroom-responsible"] == "tenant"


@pytest.mark.redis
def test_library_mode_decides_as_the_admission_api_and_settles_the_upstreams_usage(portal, upstream, tmp_path,
                                                                                   redis_url):  # fmt: skip
    url, token, _ = portal
    prefix = f"llm{uuid.uuid4().hex[:8]}:"
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_REDIS_URL": cluster.store_url(redis_url),
           "HEADROOM_SIGNING_KEY": "litellm-test-key", "HEADROOM_KEY_PREFIX": prefix,
           "HEADROOM_REDIS_TIMEOUT_S": "2", "HEADROOM_HTTP_TIMEOUT_S": "60"}  # fmt: skip
    store = RedisBackend(cluster.store_url(redis_url), prefix=prefix)
    try:
        with stack.litellm_proxy(tmp_path, upstream.url, hook=True, env=env, keys=KEYS) as gw:
            check_mode(gw.url, token, tmp_path, "litellm", lambda: None)  # the proxy sends its events itself
            store.clear()  # full buckets again for the streams
            check_streams(gw.url, tmp_path, "litellm", lambda: None)
    finally:
        store.clear()
    # No HTTP hop: the portal decided only the direct replays (request ids direct-…), nothing of the proxy's.
    assert not AdmissionEvent.objects.filter(source="admission").exclude(event_id__startswith="direct-").exists()


def test_negative_control_without_the_callback_no_event(portal, upstream, tmp_path):
    """The same proxy and request without the callback: served, and Headroom knows nothing of it."""
    url, token, _ = portal
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token}
    run = uuid.uuid4().hex[:6]
    with stack.litellm_proxy(tmp_path, upstream.url, hook=False, env=env, keys=KEYS) as gw:
        for tag, key, model, max_tokens in STEPS:
            assert ask(gw.url, key, tag, model, max_tokens, run=run).status_code == 200  # nothing throttles
    events.buffer().flush()
    assert len([k for k in stack.upstream_log(tmp_path) if k.startswith(run)]) == len(STEPS)
    assert not AdmissionEvent.objects.exists()
    assert json.dumps(stack.litellm_config("http://x", hook=False, auth=True)).count("headroom_callback") == 0
