"""Library mode and the ASGI middleware (issue 20.1), end to end on real services: a live portal
(Django's live server: the snapshot and the events API), real Redis, and a real OpenAI-compatible
proxy under uvicorn whose upstream streams SSE chunks with a final usage chunk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from admission import backends, events, params
from admission.backends.redis import RedisBackend
from admission.client import AdmissionClient
from admission.library import QUOTA_KEY, Library
from entitlements import models as m
from telemetry.models import AdmissionEvent
from tests import factories as f
from tests.admission import cluster
from tests.admission.gateway_stack import Served, proxy_app, upstream_app
from tests.admission.world import build_world

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]
SIGNING_KEY = "library-test-signing-key"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_url(redis_url):
    """The session's Redis, or the Redis Cluster of REDIS_CLUSTER_URL (tests/admission/cluster.py)."""
    return cluster.store_url(redis_url)


@pytest.fixture
def portal(live_server, fleet, store_url):
    """The live portal with the tiny world, its web tier on a Redis prefix of its own, and a
    gateway token; yields (url, token, world)."""
    world = build_world(fleet)
    web = RedisBackend(store_url, prefix=f"web{uuid.uuid4().hex[:8]}:", socket_timeout=2.0)
    prev = backends.set_backend(web)
    params.invalidate()
    user = f.UserFactory(username="gw-lib")
    m.PlatformRole.objects.get_or_create(user=user, role="gateway")
    _, token = m.ApiToken.issue(user)
    yield live_server.url, token, world
    web.clear()
    backends.set_backend(prev)
    params.invalidate()


@pytest.fixture
def library(portal, store_url):
    url, token, _ = portal
    lib = Library(url, token, signing_key=SIGNING_KEY, redis_url=store_url, prefix=f"lib{uuid.uuid4().hex[:8]}:",
                  redis_timeout_s=2.0, sweep_every_s=None, event_flush_s=3600, http_timeout_s=60)  # fmt: skip
    yield lib
    lib.close()
    lib.backend.clear()


def headers(tenant: str, cls: str, request_id: str, *, prompt: int | None = 800, region: str = "tiny-region") -> dict:
    h = {"x-headroom-tenant": tenant, "x-headroom-region": region, "x-headroom-traffic-class": cls,
         "x-request-id": request_id}  # fmt: skip
    if prompt is not None:
        h["x-headroom-prompt-tokens"] = str(prompt)
    return h


def complete_events(source: str) -> dict[str, AdmissionEvent]:
    return {e.event_id: e for e in AdmissionEvent.objects.filter(source=source, decision="complete")}


def test_a_stream_is_settled_with_the_usage_its_last_chunk_reports(library):
    stats: dict[str, int] = {}
    with Served(upstream_app(stats)) as up, Served(proxy_app(up.url, library)) as gw:
        body = {"model": "llama-test", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 200,
                "fake_tokens": 37, "fake_prompt_tokens": 640, "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        with httpx.Client(base_url=gw.url, timeout=60) as c:
            r = c.post("/v1/chat/completions", json=body, headers=headers("acme", "reserved", "stream-1", prompt=None))
        assert r.status_code == 200 and r.text.count("data: ") == 37 + 2  # 37 tokens, the usage chunk, [DONE]
    assert stats["streamed"] == 1
    library.flush()
    admit = AdmissionEvent.objects.get(source="admission-library", event_id="stream-1")
    done = complete_events("admission-library")["stream-1:complete"]
    # Reserved on the body's estimate (the 2-character prompt / 4 → 1 token, 200 output); settled on the stream's usage.
    assert (admit.decision, admit.prompt_tokens, admit.estimated_wt) == ("admit", 1, 1 + 4 * 200)
    assert (done.status, done.prompt_tokens, done.output_tokens, done.actual_wt) == ("ok", 640, 37, 640 + 4 * 37)
    assert done.ttft_ms is not None and done.e2e_ms >= done.ttft_ms
    plan = next(iter(library.snapshot.view.snap.plans.values()))
    assert library.backend.inflight(plan.scope.inflight_key) == 0  # the slot is free


def test_a_client_that_leaves_mid_stream_is_settled_cancelled_with_what_it_got(library):
    stats: dict[str, int] = {}
    with Served(upstream_app(stats)) as up, Served(proxy_app(up.url, library)) as gw:
        body = {"model": "llama-test", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 1000,
                "fake_delay_s": 0.02, "messages": [{"role": "user", "content": "x" * 400}]}  # fmt: skip
        got = 0
        with httpx.Client(base_url=gw.url, timeout=60) as c:
            hs = headers("acme", "reserved", "leaver-1", prompt=None)
            with c.stream("POST", "/v1/chat/completions", json=body, headers=hs) as r:
                assert r.status_code == 200
                for line in r.iter_lines():
                    got += line.startswith("data: ")
                    if got == 5:
                        break  # leaving: the connection closes with the response unread
        library.flush()
        done = None
        for _ in range(600):  # a hang guard: the proxy notices the next write after the disconnect
            library.flush()
            done = complete_events("admission-library").get("leaver-1:complete")
            if done is not None:
                break
            time.sleep(0.05)
    assert done is not None, "the cancelled stream was never settled"
    # Cancelled, charged the prompt estimate (400 chars / 4) and the chunks that were streamed (no usage came).
    assert done.status == "cancelled" and done.prompt_tokens == 100
    assert 5 <= done.output_tokens < 1000
    assert done.actual_wt == 100 + 4 * done.output_tokens
    plan = next(iter(library.snapshot.view.snap.plans.values()))
    assert library.backend.inflight(plan.scope.inflight_key) == 0


def sequence(gw_url: str, quota: list | None = None) -> list[tuple]:
    """One sequence of requests through the gateway; → what each got (status, reason or source, Retry-After).
    `quota` gets (request id, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens) per request."""
    quota = [] if quota is None else quota
    steps = [
        # acme reserved: 800 + 4 × 800 = 4,000 wt each; its bucket holds 12,000 (settled at the estimate).
        ("acme", "reserved", "r1", 800, 800),
        ("acme", "reserved", "r2", 800, 800),
        ("acme", "reserved", "r3", 800, 800),
        ("acme", "reserved", "r4", 800, 800),  # QUOTA_EXCEEDED
        # globex best_effort: the pool (16,800) has 4,800 left, the reclaim margin is 3,360.
        ("globex", "best_effort", "g1", 200, 200),  # 1,000 wt: admitted from its own bucket
        ("globex", "best_effort", "g2", 400, 400),  # 2,000 wt: would take the pool under the margin → RECLAIMED
        ("nobody", "shared", "n1", 100, 100),  # NOT_ENTITLED
        ("acme", "reserved", "e1", 9000, 100),  # OUTSIDE_ENVELOPE: no Retry-After
        ("acme", "reserved", "r1", 800, 800),  # r1 again: already settled → 409, never served twice
    ]
    out = []
    with httpx.Client(base_url=gw_url, timeout=60) as c:
        for tenant, cls, rid, prompt, max_out in steps:
            body = {"model": "llama-test", "max_tokens": max_out, "messages": [{"role": "user", "content": "q"}],
                    "fake_prompt_tokens": prompt}  # fmt: skip
            r = c.post("/v1/chat/completions", json=body, headers=headers(tenant, cls, rid, prompt=prompt))
            d = r.json()
            out.append((rid, r.status_code, d.get("reason") or (d.get("error") or {}).get("code") or "served",
                        r.headers.get("retry-after") is not None))  # fmt: skip
            quota.append(
                (rid, r.headers.get("x-ratelimit-limit-tokens"), r.headers.get("x-ratelimit-remaining-tokens"))
            )
        r = c.post("/v1/chat/completions", json={"model": "llama-test", "messages": []},
                   headers={**headers("acme", "reserved", "p1", region="nowhere")})  # fmt: skip
        out.append(("p1", r.status_code, r.json().get("reason"), r.headers.get("retry-after") is not None))
        r = c.post("/v1/chat/completions", json={"model": "llama-test"},
                   headers={**headers("acme", "reserved", "b1"), "x-headroom-prompt-tokens": "many"})  # fmt: skip
        out.append(("b1", r.status_code, r.json()["error"]["field"], False))
    return out


def test_http_mode_and_library_mode_decide_the_same_on_the_same_sequence(portal, library):
    url, token, _ = portal
    http_mode = AdmissionClient(url, token, timeout_s=10)
    with Served(upstream_app({})) as up:
        q_http: list = []
        q_lib: list = []
        with Served(proxy_app(up.url, http_mode)) as gw:
            over_http = sequence(gw.url, q_http)
        with Served(proxy_app(up.url, library)) as gw:
            in_process = sequence(gw.url, q_lib)
    assert over_http == in_process
    # The remaining quota reaches the gateway's client in both modes, on every answer the store made
    # (served, throttled, the settled replay), none on those decided without it. acme reserved's
    # bucket is 12,000 wt deep at 200 wt/s; globex best_effort's 3,000 at 50 wt/s.
    for q in (q_http, q_lib):
        assert [(rid, lim) for rid, lim, _ in q] == [
            ("r1", "12000"), ("r2", "12000"), ("r3", "12000"), ("r4", "12000"), ("g1", "3000"), ("g2", "3000"),
            ("n1", None), ("e1", None), ("r1", "12000"),
        ]  # fmt: skip
        left = {rid: int(rem) for rid, _, rem in q[:3]}
        # 4,000 wt each (refilling at 200 wt/s meanwhile, so at least what the estimates leave)
        assert 8000 <= left["r1"] < 8000 + 200 * 60 and left["r2"] < left["r1"] and left["r3"] < left["r2"]
    assert [x[1:] for x in over_http] == [
        (200, "served", False), (200, "served", False), (200, "served", False), (429, "QUOTA_EXCEEDED", True),
        (200, "served", False), (429, "RECLAIMED", True), (429, "NOT_ENTITLED", True), (429, "OUTSIDE_ENVELOPE", False),
        (409, "duplicate_request", False), (429, "PLACEMENT", True), (400, "x-headroom-prompt-tokens", False),
    ]  # fmt: skip
    # Both modes reported the same decisions as events (the portal's own source, and the library's).
    library.flush()
    events.buffer().flush()
    web = sorted((e.event_id, e.decision, e.reason) for e in AdmissionEvent.objects.filter(source="admission"))
    lib = sorted((e.event_id, e.decision, e.reason) for e in AdmissionEvent.objects.filter(source="admission-library"))
    assert web and web == lib


def test_the_library_and_the_middleware_run_without_django(portal, store_url):
    """A gateway is not a Django process: the library reserves and completes with no Django module loaded."""
    url, token, _ = portal
    code = f"""
import sys, json
from admission.library import QUOTA_KEY, Library
from admission.asgi import AdmissionMiddleware
lib = Library({url!r}, {token!r}, signing_key="k", redis_url={store_url!r}, prefix="nodj{uuid.uuid4().hex[:6]}:",
              redis_timeout_s=2.0, sweep_every_s=None, http_timeout_s=60)
d = lib.reserve(request_id="nodj-1", tenant="acme", model="llama-test", region="tiny-region",
                traffic_class="reserved", prompt_tokens=10, max_output_tokens=10)
done = lib.complete(d["reservation_id"], prompt_tokens=10, output_tokens=3)
lib.flush(); lib.backend.clear()
print(json.dumps([d["decision"], done["status"], sorted(m for m in sys.modules if m.split(".")[0] == "django")]))
"""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["admit", "ok", []]


def test_library_mode_enforces_the_usd_budget_the_portal_sets(portal, library):
    """Issue 51.3: the snapshot carries $ budgets and prices; the library holds, refuses and settles alike."""
    from entitlements.usd_budget_services import set_usd_budget
    from entitlements.usd_per_token import usd_per_wt

    _, _, world = portal
    acc = world.pool.accelerator
    acc.cloud_on_demand_per_hour = 3.0
    acc.save()
    p = usd_per_wt(m.Pool.objects.get(pk=world.pool.pk))
    assert p
    set_usd_budget(actor=world.fleet.operator, tenant="acme", project=None, budget_usd=1500 * p, reason="lib")
    deadline = time.monotonic() + 30
    while not library.snapshot.view.snap.usd.limits:  # the follower polls the portal's snapshot
        assert time.monotonic() < deadline, "the library never saw the $ budget"
        library.snapshot.poll()
        time.sleep(0.05)
    ask = {"tenant": "acme", "model": "llama-test", "region": "tiny-region", "traffic_class": "reserved",
           "prompt_tokens": 200, "max_output_tokens": 200}  # fmt: skip
    first = library.reserve(request_id="L1", **ask)  # 1,000 wt held: $500 × p left
    assert first["decision"] == "admit"
    assert first[QUOTA_KEY]["x-headroom-budget-remaining-usd"] == f"{500 * p:.2f}"
    second = library.reserve(request_id="L2", **ask)
    assert (second["reason"], second["limit"]) == ("BUDGET_EXHAUSTED", "usd")
    library.complete(reservation_id=first["reservation_id"], prompt_tokens=200, output_tokens=0, status="ok")
    assert library.reserve(request_id="L3", **ask)["decision"] == "admit"  # 200 wt charged: 1,300 left
