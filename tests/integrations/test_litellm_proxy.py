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
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from admission import backends, events, params
from admission.backends.memory import MemoryBackend
from telemetry.models import AdmissionEvent
from tests.integrations import stack
from tests.integrations.gateway_calls import EXPECTED, STEPS, Gateway, check_settled, check_streams, library_mode

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


@pytest.fixture
def upstream(tmp_path):
    with stack.upstream(tmp_path) as up:
        yield up


def litellm(url: str) -> Gateway:
    return Gateway(url, "x-litellm-call-id", timeout_s=120)


def through_litellm(gw: Gateway, run: str) -> list[tuple]:
    out = []
    for r in gw.steps(run):
        reason = r.headers.get("x-headroom-reason")
        if r.status_code == 429:  # LiteLLM's own rate-limit error, naming Headroom's reason
            err = r.json()["error"]
            assert err["type"] == "throttling_error" and f"Headroom: {reason} (" in err["message"], err
        else:
            assert reason is None
        out.append((r.status_code, reason, r.headers.get("retry-after") is not None))
    return out


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


def check_mode(gw: Gateway, token: str, workdir: Path, source: str, flush) -> None:
    run = uuid.uuid4().hex[:6]
    got = through_litellm(gw, run)
    assert got == EXPECTED
    evs, usage = check_settled(run, got, workdir, source, flush)
    # The same requests straight to the admission API decide the same.
    assert directly(token, run, evs, usage) == got


def test_http_mode_decides_as_the_admission_api_and_settles_the_upstreams_usage(portal, upstream, tmp_path):
    url, token, _ = portal
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_TIMEOUT_S": "30"}
    with stack.litellm_proxy(tmp_path, upstream.url, hook=True, env=env, keys=KEYS) as proxy:
        gw, flush = litellm(proxy.url), events.buffer().flush
        check_mode(gw, token, tmp_path, "admission", flush)
        backends.set_backend(MemoryBackend())  # full buckets again for the streams
        check_streams(gw, tmp_path, "admission", flush, extra_content=True)
        # A key that names no tenant is refused, never served unmetered.
        r = gw.ask("sk-no-tenant", "x", "llama-test", 5, run="none")
        assert r.status_code == 403 and "tenant" in r.text
        # Retry-After and the party responsible on a throttle, as the admission API answers them.
        run = uuid.uuid4().hex[:6]
        assert gw.ask("sk-acme", "q1", "llama-test", 1990, run=run).status_code == 200  # ~8,000 of 12,000
        r = gw.ask("sk-acme", "q2", "llama-test", 1990, run=run)
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
    env, store = library_mode(url, token, redis_url, "litellm", http_timeout_s=60)
    try:
        with stack.litellm_proxy(tmp_path, upstream.url, hook=True, env=env, keys=KEYS) as proxy:
            gw = litellm(proxy.url)
            check_mode(gw, token, tmp_path, "litellm", lambda: None)  # the proxy sends its events itself
            store.clear()  # full buckets again for the streams
            check_streams(gw, tmp_path, "litellm", lambda: None, extra_content=True)
    finally:
        store.clear()
    # No HTTP hop: the portal decided only the direct replays (request ids direct-…), nothing of the proxy's.
    assert not AdmissionEvent.objects.filter(source="admission").exclude(event_id__startswith="direct-").exists()


def test_negative_control_without_the_callback_no_event(portal, upstream, tmp_path):
    """The same proxy and request without the callback: served, and Headroom knows nothing of it."""
    url, token, _ = portal
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token}
    run = uuid.uuid4().hex[:6]
    with stack.litellm_proxy(tmp_path, upstream.url, hook=False, env=env, keys=KEYS) as proxy:
        gw = litellm(proxy.url)
        for tag, key, model, max_tokens in STEPS:
            assert gw.ask(key, tag, model, max_tokens, run=run).status_code == 200  # nothing throttles
    events.buffer().flush()
    assert len([k for k in stack.upstream_log(tmp_path) if k.startswith(run)]) == len(STEPS)
    assert not AdmissionEvent.objects.exists()
    assert json.dumps(stack.litellm_config("http://x", hook=False, auth=True)).count("headroom_callback") == 0
