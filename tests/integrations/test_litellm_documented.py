"""LiteLLM as docs/gateways.md says to try it (issue 48.6): the proxy started from the documented
integrations/litellm/try.yaml itself (LiteLLM's `mock_response` as the model, keys and tenants from
integrations/litellm/keys.example.json through the custom auth headroom_keys.py, no LiteLLM database),
before the live portal holding the `make run` demo (load_demo), in HTTP mode with the demo's gateway login.

- a key in the file is admitted and metered: the reserve and the complete are events in Headroom, with
  the file's tenant, project and class and the usage LiteLLM answered;
- a key not in the file is refused 401 and leaves no event; a key in the file may not call LiteLLM's
  admin routes; the master key names no tenant and is refused a completion (never served unmetered);
- a tenant Headroom throttles gets Headroom's refusal: its entitlement is used up on the portal's store
  first (the store's clock stands still, so nothing refills), then its key's request is a 429 naming
  the same reason.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from io import StringIO

import httpx
import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from admission import backends, events, params
from admission.backends.memory import MemoryBackend
from entitlements.models import ApiToken
from telemetry.models import AdmissionEvent
from tests.integrations import stack
from tests.integrations.gateway_calls import wait_for_events

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HERE = stack.ROOT / "integrations" / "litellm"
TRY, CONFIG, KEYS = HERE / "try.yaml", HERE / "config.yaml", HERE / "keys.example.json"
MASTER = "sk-test-admin"


@pytest.fixture
def demo_portal(live_server):
    call_command("load_demo", stdout=StringIO())
    frozen = time.time()  # the store's clock: a used-up bucket stays used up while the proxy is asked
    prev = backends.set_backend(MemoryBackend(clock=lambda: frozen))
    params.invalidate()
    _, token = ApiToken.issue(get_user_model().objects.get(username="demo-gateway"))
    yield live_server.url, token
    backends.set_backend(prev)
    params.invalidate()


@pytest.fixture
def proxy(demo_portal, tmp_path):
    """`litellm --config integrations/litellm/try.yaml`, started elsewhere (the modules it names are
    found beside the file), with the environment the file's comment shows."""
    stack.need_litellm()
    url, token = demo_portal
    port = stack.free_port()
    env = stack.child_env(PYTHONPATH=str(stack.ROOT), HEADROOM_URL=url, HEADROOM_GATEWAY_TOKEN=token,
                          HEADROOM_KEYS_FILE=str(KEYS), LITELLM_MASTER_KEY=MASTER, LITELLM_LOCAL_MODEL_COST_MAP="True",
                          HEADROOM_TIMEOUT_S="30", LITELLM_LOG="ERROR", NO_DOCS="True")  # fmt: skip
    p = stack.Proc([str(stack.LITELLM), "--config", str(TRY), "--host", "127.0.0.1", "--port", str(port),
                    "--num_workers", "1"], env=env, port=port, probe="/health/liveliness", log=tmp_path / "litellm.out",
                   cwd=tmp_path)  # fmt: skip
    yield p, token
    p.stop()


def ask(url: str, key: str, rid: str, max_tokens: int = 50) -> httpx.Response:
    body = {"model": "llama-3.1-8b", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hello"}]}
    headers = {"Authorization": f"Bearer {key}", "x-litellm-call-id": rid}
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=120)


def use_up(token: str, tenant: str, project: str, cls: str) -> str:
    """Reserve for the scope (never completing) until Headroom refuses even the smallest request:
    its bucket or its in-flight cap is spent. → the reason."""
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    reason = None
    for prompt, out in ((2000, 1000), (50, 50), (1, 1)):  # big first, then down to the least a request can weigh
        for i in range(100_000):
            r = c.post("/api/v1/admission/reserve", {"request_id": f"use-up-{prompt}-{i}", "tenant": tenant,
                       "project": project, "model": "llama-3.1-8b", "region": "us-east", "traffic_class": cls,
                       "prompt_tokens": prompt, "max_output_tokens": out}, format="json")  # fmt: skip
            if r.status_code == 429:
                reason = r.json()["reason"]
                break
            assert r.status_code == 200, r.content
    assert reason in ("QUOTA_EXCEEDED", "CONCURRENCY_LIMIT"), reason
    return reason


def test_the_documented_proxy_meters_a_mapped_key_refuses_an_unknown_one_and_passes_a_throttle(proxy):
    p, token = proxy
    run = uuid.uuid4().hex[:6]
    # A key in the file: served by the stand-in, and Headroom decided and metered it.
    r = ask(p.url, "sk-try-acme-search", f"{run}-ok")
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["choices"][0]["message"]["content"] == "A stand-in answer: no model was called."
    want = {f"{run}-ok", f"{run}-ok:complete"}
    evs = wait_for_events("admission", run, want, events.buffer().flush)
    assert want <= evs.keys(), sorted(evs)
    reserve, done = evs[f"{run}-ok"], evs[f"{run}-ok:complete"]
    assert (reserve.decision, reserve.tenant, reserve.project, reserve.traffic_class) == (
        "admit", "acme", "search", "reserved",
    )  # fmt: skip
    usage = answer["usage"]
    assert (done.status, done.prompt_tokens, done.output_tokens) == (
        "ok", usage["prompt_tokens"], usage["completion_tokens"],
    )  # fmt: skip

    # A key not in the file: refused by the custom auth, before Headroom is asked.
    r = ask(p.url, "sk-not-in-the-file", f"{run}-unknown")
    assert r.status_code == 401 and "unknown key" in r.text, r.text
    # A key in the file is a model key, not a LiteLLM admin; the master key is an admin with no tenant.
    r = httpx.post(p.url + "/key/generate", json={}, headers={"Authorization": "Bearer sk-try-acme-search"})
    assert r.status_code == 403 and "model routes only" in r.text, r.text
    r = ask(p.url, MASTER, f"{run}-master")
    assert r.status_code == 403 and "names no tenant" in r.text, r.text

    # A tenant Headroom throttles: the proxy answers Headroom's refusal.
    reason = use_up(token, "initech", "codegen", "shared")
    r = ask(p.url, "sk-try-initech-codegen", f"{run}-throttled")
    assert r.status_code == 429, r.text
    assert r.headers["x-headroom-reason"] == reason and r.headers["x-headroom-responsible"] == "tenant"
    assert f"Headroom: {reason} (tenant)" in r.json()["error"]["message"]
    want = {f"{run}-throttled"}
    evs = wait_for_events("admission", run, want | {f"{run}-ok"}, events.buffer().flush)
    assert evs[f"{run}-throttled"].decision == "throttle" and evs[f"{run}-throttled"].reason == reason
    # The refused keys were never decided: no event for them.
    assert not AdmissionEvent.objects.filter(event_id__in=[f"{run}-unknown", f"{run}-master"]).exists()


def test_the_production_example_authenticates_and_meters_as_the_tried_one():
    """config.yaml (a real model server) and try.yaml (the stand-in) differ only in their models."""
    tried, prod = (yaml.safe_load(f.read_text()) for f in (TRY, CONFIG))
    assert prod["general_settings"] == tried["general_settings"]
    assert prod["litellm_settings"]["callbacks"] == tried["litellm_settings"]["callbacks"]
    assert "custom_auth" in tried["general_settings"] and "database_url" not in json.dumps(prod)
    assert all("mock_response" not in m["litellm_params"] for m in prod["model_list"])


KEYFILE_SCRIPT = """
import importlib.util, json, os, sys
path = sys.argv[1]
def write(doc):
    with open(path, "w") as fh:
        fh.write(doc if isinstance(doc, str) else json.dumps(doc))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a change, whatever the clock's grain
def module():
    spec = importlib.util.spec_from_file_location("headroom_keys", sys.argv[2])
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m
out = {}
write({"keys": {"sk-a": {"tenant": "acme"}}})
m = module()
out["first"] = m.KEYS.get("sk-a")
write('{"keys": {"sk-a": {"tenant": "acme"}, ')  # half-written
out["bad edit"] = m.KEYS.get("sk-a")
write({"keys": {"sk-b": {"tenant": "globex", "traffic_class": "shared"}}})
out["good edit"] = [m.KEYS.get("sk-a"), m.KEYS.get("sk-b")]
write({"keys": {"sk-c": {"project": "search"}}})
try:
    module()
except ValueError as exc:
    out["no tenant at start"] = str(exc)
print(json.dumps(out))
"""


def test_the_keys_file_is_read_again_on_a_change_and_a_bad_edit_keeps_the_last_good_keys(tmp_path):
    stack.need_litellm()
    env = stack.child_env(HEADROOM_KEYS_FILE=str(tmp_path / "keys.json"), LITELLM_LOCAL_MODEL_COST_MAP="True")
    got = subprocess.run([str(stack.GATEWAY_VENV / "bin" / "python"), "-c", KEYFILE_SCRIPT, str(tmp_path / "keys.json"),
                          str(HERE / "headroom_keys.py")], env=env, capture_output=True, text=True, check=True)  # fmt: skip
    out = json.loads(got.stdout.splitlines()[-1])
    assert out["first"] == out["bad edit"] == {"tenant": "acme"}
    assert out["good edit"] == [None, {"tenant": "globex", "traffic_class": "shared"}]
    assert "names no tenant" in out["no tenant at start"]
