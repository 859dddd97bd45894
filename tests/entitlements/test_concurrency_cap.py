"""Issue 15.5 through the entitlement API: `max_concurrency_derivation` shows the derived cap
(Little's law × burst, capped by the KV share) beside the stored one; an operator's override (an
amendment, with a reason) reads as overridden; the demo's grants use the derived cap."""

from __future__ import annotations

import math

from capacity.envelope import envelope_lengths
from entitlements.concurrency import derive_max_concurrency
from entitlements.services import entitlement_amend, entitlement_grant
from tests.clients import api_client
from tests.factories import ENVELOPE, grant_kwargs


def test_the_api_shows_the_derivation_and_an_override(fleet):
    ent = entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "14"))
    url = f"/api/v1/entitlements/{ent.uuid}"
    d = api_client(fleet.operator).get(url).json()["max_concurrency_derivation"]

    # Envelope means: prompt (1,000 / 4,000, max 8,000) and output (200 / 800, max 2,000) capped lognormals.
    p = envelope_lengths(1000, 4000, 8000).mean
    o = envelope_lengths(200, 800, 2000).mean
    rps = 14 * 1000 / (p + 4 * o)
    little = rps * (2.0 + o * 0.2)  # the point's limits: TTFT 2 s, TPOT 200 ms (no measured p99s)
    # KV: (8 × 80 − 140) GB ÷ 327,680 B = 1,525,878 tokens per replica; 14 ÷ 280 CU × 4 replicas of it.
    kv = math.floor(14 / 280 * 4 * 1_525_878 / (p + o))
    assert d["burst_cap"] == math.ceil(little * 2)
    assert d["kv_ceiling"] == kv
    assert d["derived"] == min(math.ceil(little * 2), kv)
    assert (d["stored"], d["overridden"]) == (64, True)  # the test envelope's 64 is not the derived cap
    assert "an upper bound on the mean" in d["latency_source"]

    entitlement_amend(actor=fleet.operator, reason="use the derived cap", entitlement=ent, max_concurrency=d["derived"])
    again = api_client(fleet.operator).get(url).json()["max_concurrency_derivation"]
    assert (again["stored"], again["overridden"]) == (d["derived"], False)


def test_a_heavy_class_is_capped_by_its_kv_share(fleet):
    # 8k prompts, 2k outputs at the envelope's max; 28 CU = 10 % of the pool's 280.
    heavy = type(ENVELOPE)(**{**ENVELOPE.__dict__, "prompt_p50": 8000, "prompt_p95": 8000, "output_p50": 2000,
                              "output_p95": 2000})  # fmt: skip
    cap = derive_max_concurrency(pool=fleet.pool_a, cu=28, envelope=heavy)
    # 28 × 1,000 ÷ 16,000 = 1.75 req/s × (2 + 2,000 × 0.2 = 402 s) × 2 = 1,407; KV ⌊0.1 × 4 × 1,525,878 ÷ 10,000⌋ = 61.
    assert (cap.burst_cap, cap.kv_ceiling, cap.value, cap.binding) == (1407, 61, 61, "kv")


def test_the_entitlement_page_shows_the_derivation(fleet):
    from tests.clients import web_client

    ent = entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "14"))
    html = web_client(fleet.operator).get(f"/entitlements/{ent.uuid}/").content.decode()
    derived = derive_max_concurrency(pool=fleet.pool_a, cu=14, envelope=ent).value
    assert "At most 64 requests in flight, set by an operator" in html
    assert f"(the derived default is {derived}: {derived} = max(1, min(" in html
