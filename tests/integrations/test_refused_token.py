"""A gateway whose token Headroom refuses is cut off, loudly (issue 48.2): against the live portal, the
plug-ins' own reserve (integrations.headroom_admission.LazyAdmission in HTTP mode, as both gateways build it
from the environment) refuses every traffic class with GATEWAY_TOKEN_REFUSED (no fail-open admit), counts
the event, and the Envoy ext_proc answers 503 naming the token problem. The negative control: the same
calls with the live token are admitted."""

from __future__ import annotations

import json

import pytest

from entitlements.models import ApiToken
from entitlements.token_services import token_revoke
from integrations import headroom_admission as ha
from integrations.envoy import ext_proc

pytestmark = pytest.mark.django_db(transaction=True)
CLASSES = ("reserved", "shared", "best_effort")


def _plugin(monkeypatch, url: str, token: str) -> ha.LazyAdmission:
    monkeypatch.delenv("HEADROOM_REDIS_URL", raising=False)
    monkeypatch.setenv("HEADROOM_URL", url)
    monkeypatch.setenv("HEADROOM_GATEWAY_TOKEN", token)
    monkeypatch.setenv("HEADROOM_TIMEOUT_S", "30")  # a busy machine: the refusal must not be a timeout
    return ha.LazyAdmission("test")


def _reserve(plugin: ha.LazyAdmission, cls: str, rid: str) -> dict:
    tenant = "globex" if cls == "best_effort" else "acme"
    d, _ = plugin.reserve(request_id=rid, tenant=tenant, model="llama-test", region="tiny-region", traffic_class=cls,
                          prompt_tokens=20, max_output_tokens=20)  # fmt: skip
    return d


def _envoy_answer(plugin: ha.LazyAdmission, cls: str) -> tuple[int, dict]:
    key = {"reserved": "sk-acme", "shared": "sk-acme-shared", "best_effort": "sk-globex"}[cls]
    config = ext_proc.Config(keys={"sk-acme": {"tenant": "acme", "traffic_class": "reserved"},
                          "sk-acme-shared": {"tenant": "acme", "traffic_class": "shared"},
                          "sk-globex": {"tenant": "globex", "traffic_class": "best_effort"}},
                    models={}, region="tiny-region")  # fmt: skip
    proc = ext_proc.Processor(config, plugin.get(), workers=1)
    headers = {":method": "POST", ":path": "/v1/chat/completions", "authorization": f"Bearer {key}",
               "x-request-id": f"envoy-{cls}"}  # fmt: skip
    body = json.dumps({"model": "llama-test", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
    r, _quota, _rid, _est = proc.on_request(headers, body.encode())
    proc.pool.shutdown()
    if r is None or not r.HasField("immediate_response"):
        return 200, {}
    return r.immediate_response.status.code, json.loads(r.immediate_response.body)


@pytest.fixture
def tokens(portal, fleet):
    url, live, _ = portal
    revoked_row, revoked = ApiToken.issue(ApiToken.objects.get(user__username="gw-gateway").user, name="old")
    assert token_revoke(actor=fleet.operator, token=revoked_row, staff=True)
    return url, live, {"revoked": revoked, "mistyped": live[:-2] + "xx"}


@pytest.mark.parametrize("which", ["revoked", "mistyped"])
def test_a_refused_token_is_admitted_on_no_class_and_counted(tokens, monkeypatch, which, caplog):
    url, _, bad = tokens
    plugin = _plugin(monkeypatch, url, bad[which])
    before = ha.EVENTS["gateway_token_refused"]
    for i, cls in enumerate(CLASSES):
        d = _reserve(plugin, cls, f"{which}-{i}")
        assert (d["decision"], d["reason"], d["retry_after_s"]) == ("throttle", "GATEWAY_TOKEN_REFUSED", None), d
        assert "HEADROOM_GATEWAY_TOKEN" in d["message"] and ha.throttle_status(d) == 503
        status, body = _envoy_answer(plugin, cls)
        assert status == 503 and "GATEWAY_TOKEN_REFUSED" in body["error"]["message"], body
    assert ha.EVENTS["gateway_token_refused"] - before == 2 * len(CLASSES)
    logged = [r for r in caplog.records if "refused this gateway's token" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelname == "ERROR"  # once a minute, not once a request


def test_negative_control_the_live_token_is_admitted(tokens, monkeypatch):
    url, live, _ = tokens
    plugin = _plugin(monkeypatch, url, live)
    d = _reserve(plugin, "reserved", "live-1")
    assert (d["decision"], d["source"]) == ("admit", "entitlement"), d
    assert _envoy_answer(plugin, "reserved")[0] == 200
