"""Remaining-quota headers (issue 36.2, docs/contract.md §5 "Remaining quota").

The contract half runs on both backends: what a reserve reports is exactly what the store holds
right after the call (read back from the store, refilled to the store's own `now` of the answer),
on every path an answer can take. The API half checks the header names and their meaning in
capacity-unit terms over HTTP (the library and middleware share them: test_library_asgi.py).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from admission import core, events, params, plans
from admission.backends import get_backend
from admission.backends.base import has_rps, periods_at
from admission.backends.quota import Quota
from capacity.bucket import refilled
from entitlements.services import entitlement_amend
from tests.admission.test_budget_contract import Clock, complete, lop, noon
from tests.admission.world import body, build_world

RESERVE = "/api/v1/admission/reserve"


def stored(store, b, now: float) -> float:
    """Bucket `b`'s level as the store holds it, refilled to `now` (a key never written is full)."""
    got = store.bucket_state(b.key)
    if got is None:
        return b.depth
    level, at = got
    return refilled(level, b.rate, b.depth, now - at)


def rem(a) -> Quota:
    """An answer's remaining quota read into fields (every scope mk() builds has a request rate)."""
    q = Quota.parse(a.quota, True)
    assert q is not None
    return q


def assert_equals_store(store, o, q: Quota | None) -> None:
    """The answer's header values are the store's state right after the call, in the headers' words
    (quota.Quota.of: the Python spelling of the rule reserve.lua formats with)."""
    assert q is not None and has_rps(o.scope)
    s, lim = o.scope, o.scope.limits
    rq = (stored(store, lim.rps, q.now), lim.rps.rate, lim.rps.depth) if lim.rps is not None else None
    left = tuple(
        p.limit - (store.used(k) or 0.0) for p, k in zip(lim.periods, period_keys(store, o, q.now), strict=True)
    )
    assert q == Quota.of(q.now, stored(store, s.own, q.now), s.own.rate, s.own.depth, rq, left)


def period_keys(store, o, now: float) -> list[str]:
    lim = o.scope.limits
    # On Redis the periods are named around the shifted Python clock (Clock.at); Redis' clock, which
    # `now` is, picks among them: the current one here (tests sit at noon, mid-month).
    t = now + getattr(store, "period_offset_s", 0.0) if hasattr(store, "client") else now
    return [f"{p.key}:{periods_at(p.kind, lim.tz, t)[1][0]}" for p in lim.periods]


def mk(store, **kw):
    """A scope with every limit: own 10 wt/s × 1,000 deep, 2 requests/s × 3, daily 2,500, monthly 10,000."""
    args = {"cost": 300.0, "own": (10.0, 1000.0), "rps": (2.0, 3.0), "daily": 2500, "monthly": 10_000}
    return lop(store, **{**args, **kw})


def test_an_admit_reports_what_the_store_holds_after_it(store):
    noon(Clock(store))
    for _ in range(2):
        o = mk(store)
        a = store.reserve(o)
        assert a.admitted
        assert_equals_store(store, o, rem(a))
    # written by this very call: the level is the stored one, at the answer's own time
    level, at = store.bucket_state(o.scope.own.key)
    assert (rem(a).tokens, rem(a).now) == (str(math.floor(level)), at)
    assert rem(a).budgets == ("1900", "9400")  # both periods charged the two estimates of 300


def test_every_throttle_and_a_replay_report_the_store_state(store):
    noon(Clock(store))
    first = mk(store, req="same")
    store.reserve(first)
    cases = {
        "QUOTA_EXCEEDED": mk(store, cost=5000.0, units=1.0),  # more than the own bucket holds
        "BUDGET_EXHAUSTED": mk(store, cost=100.0, units=5000.0),  # more than the daily budget
    }
    for reason, o in cases.items():
        t = store.reserve(o)
        assert t.raw.split("|")[1] == reason
        assert_equals_store(store, o, rem(t))
    # the request rate: 3 deep, one admit above, then two more spend it
    store.reserve(mk(store, cost=1.0))
    store.reserve(mk(store, cost=1.0))
    o = mk(store, cost=1.0)
    t = store.reserve(o)
    assert t.raw.startswith("T|QUOTA_EXCEEDED|") and t.raw.endswith("|rps")
    assert_equals_store(store, o, rem(t))
    assert rem(t).requests == "0"
    again = store.reserve(mk(store, req="same"))
    assert again.replay and again.admitted
    assert_equals_store(store, first, rem(again))


def test_a_concurrency_throttle_reports_the_store_state(store):
    noon(Clock(store))
    o = mk(store)
    store.reserve(o)
    capped = mk(store)
    capped = dataclasses.replace(capped, scope=dataclasses.replace(capped.scope, max_concurrency=1))
    t = store.reserve(capped)
    assert t.raw.startswith("T|CONCURRENCY_LIMIT|")
    assert_equals_store(store, capped, rem(t))


@pytest.mark.parametrize(
    ("own", "cost", "tokens", "reset"),
    [
        ((10.0, 1000.0), 300.0, "700", "30"),  # whole seconds
        ((3.0, 1000.0), 1.0, "999", "0.334"),  # a third of a second, rounded up to the millisecond
        ((7.0, 1000.0), 0.5, "999", "0.072"),  # half a token left to refill: 71.43 ms → 72
        ((0.0, 1000.0), 300.0, "700", "never"),  # a bucket that does not refill
        ((1e9, 1e15), 1.5, "999999999999998", "0.001"),  # the largest depths: exact digits
        ((10.0, 1000.0), 0.0, "1000", "0"),  # full
        ((1e-3, 1000.0), 300.0, "700", "300000"),  # five minutes at a slow refill
        ((1e-9, 1000.0), 300.0, "700", "300000000000"),  # just under quota.NEVER_S
        ((1e-320, 1000.0), 300.0, "700", "never"),  # the wait overflows to infinity: never, not an error
        ((1.0, 2.0**53), 1.0, str(2**53 - 1), "1"),  # the largest whole Redis answers as an integer
        ((1.0, 2.0**53 + 2), 0.0, str(2**53 + 2), "0"),  # the smallest it answers as digits (full: no refill)
        ((1.0, 1e308), 1.0, str(math.floor(1e308)), "0"),  # 309 digits, written alike (1 wt is below the step)
    ],
)
def test_the_values_are_formatted_alike_on_both_stores(store, own, cost, tokens, reset):
    """reserve.lua's whole/to_full and base's, on edge values (the admit wrote the level: no refill since)."""
    noon(Clock(store))
    o = mk(store, own=own, cost=cost, units=cost)
    a = store.reserve(o)
    assert a.admitted
    assert (rem(a).tokens, rem(a).reset_tokens) == (tokens, reset)
    assert_equals_store(store, o, rem(a))


def test_a_debt_reads_zero(store):
    """Settled above the estimate, the own bucket is in debt: no tokens left, and the wait counts the debt."""
    noon(Clock(store))
    o = mk(store, own=(10.0, 1000.0), cost=900.0, units=1.0)
    assert store.reserve(o).admitted
    complete(store, o.reservation_id, prompt=10, output=400)  # 10 + 4 × 400 = 1,610 wt actual
    t = store.reserve(mk(store, own=(10.0, 1000.0), cost=1.0, units=1.0))
    assert (rem(t).tokens, t.raw.split("|")[1]) == ("0", "QUOTA_EXCEEDED")
    assert float(rem(t).reset_tokens) > 100.0  # more than the full depth at 10 wt/s
    assert_equals_store(store, mk(store, own=(10.0, 1000.0)), rem(t))


def test_budgets_without_a_request_rate_are_named_in_order(store):
    """The answer carries the request bucket's pair only where the scope has a request rate: the header
    names (admission.core.quota_headers) follow the store's fields in both shapes."""
    noon(Clock(store))
    o = mk(store, rps=None)
    a = store.reserve(o)
    assert a.admitted and not has_rps(o.scope)
    q = Quota.parse(a.quota, False)
    assert q is not None and q.requests is None and q.budgets == ("2200", "9700")
    h = core.quota_headers(core.quota_names(o.scope), a.quota)
    assert h == {
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "700",
        "x-ratelimit-reset-tokens": "30",
        "x-headroom-budget-remaining-daily": "2200",
        "x-headroom-budget-remaining-monthly": "9700",
    }
    with_rps = mk(store)
    h = core.quota_headers(core.quota_names(with_rps.scope), store.reserve(with_rps).quota)
    assert (h["x-ratelimit-limit-requests"], h["x-ratelimit-remaining-requests"]) == ("3", "2")
    assert h["x-headroom-budget-remaining-daily"] == "1900"


def test_no_quota_when_not_asked(store):
    noon(Clock(store))
    o = dataclasses.replace(mk(store), quota=False)
    a = store.reserve(o)
    assert a.admitted and a.quota is None


# ---- over HTTP: the header names and what they mean -------------------------------------------


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


def own_level(w) -> tuple[float, float, float]:
    """acme reserved's own bucket: (level as stored, rate, depth)."""
    snap = params.current()
    sp = snap.lookup("acme", "", "llama-test", "tiny-region", "reserved")
    scope = plans.plan_for(snap, sp, snap.pools[sp.pool_id], get_backend().prefix,
                           ("acme", "llama-test", "tiny-region", "reserved")).scope  # fmt: skip
    return get_backend().level(scope.own.key), scope.own.rate, scope.own.depth


def test_http_admit_and_throttle_carry_the_remaining_quota(w, sink):
    # acme reserved: 200 wt/s, 12,000 wt deep; each request 200 + 4 × 800 = 3,400 wt (no max output: p95)
    r = w.gateway.post(RESERVE, body("acme", "reserved", "q1", out=None), format="json")
    assert r.status_code == 200
    level, rate, depth = own_level(w)
    assert (rate, depth) == (200.0, 12_000.0)
    assert level == 12_000.0 - 3400.0
    assert r["x-ratelimit-limit-tokens"] == "12000"
    assert r["x-ratelimit-remaining-tokens"] == "8600"
    assert r["x-ratelimit-reset-tokens"] == "17"  # 3,400 wt to refill at 200 wt/s
    for name in ("x-ratelimit-remaining-requests", "x-headroom-budget-remaining-daily"):
        assert not r.has_header(name)  # neither a request rate nor a budget is set
    for i in range(3):
        w.gateway.post(RESERVE, body("acme", "reserved", f"q{i + 2}", out=None), format="json")
    t = w.gateway.post(RESERVE, body("acme", "reserved", "q9", out=None), format="json")
    assert t.status_code == 429 and t.json()["reason"] == "QUOTA_EXCEEDED"
    level, _, _ = own_level(w)
    remaining = int(t["x-ratelimit-remaining-tokens"])
    # the throttle wrote nothing: what it reports is the stored level refilled since, never less
    assert remaining >= max(0, math.floor(level)) and remaining < 3400
    # rounded up to the millisecond (contract §5): within 1 ms of the last write the stored level's own wait,
    # rounded up, may pass it by less than that millisecond
    assert 0 < float(t["x-ratelimit-reset-tokens"]) <= math.ceil((12_000 - max(0.0, level)) / 200 * 1000) / 1000
    assert t["Retry-After"] == str(t.json()["retry_after_s"])


def test_http_request_rate_and_budgets_have_their_headers(w, sink):
    entitlement_amend(actor=w.fleet.operator, reason="limits", entitlement=w.lender, daily_budget=10_000,
                      monthly_budget=100_000, budget_unit="wt", max_rps=5, burst=10)  # fmt: skip
    r = w.gateway.post(RESERVE, body("acme", "reserved", "b1"), format="json")  # 200 + 4 × 200 = 1,000 wt
    assert r.status_code == 200
    assert r["x-ratelimit-limit-requests"] == "10"
    assert r["x-ratelimit-remaining-requests"] == "9"
    assert r["x-ratelimit-reset-requests"] == "0.2"  # one request back at 5/s
    assert r["x-headroom-budget-remaining-daily"] == "9000"
    assert r["x-headroom-budget-remaining-monthly"] == "99000"


def test_answers_no_store_made_carry_no_quota(w, sink):
    for b in (body("nobody", "reserved", "n1"), body("acme", "reserved", "e1", prompt=10**6)):
        r = w.gateway.post(RESERVE, b, format="json")
        assert r.status_code == 429
        assert not r.has_header("x-ratelimit-remaining-tokens")
    events.buffer().flush()


# ---- the ASGI middleware: Headroom's quota replaces an upstream provider's ---------------------


class InProcess:
    """The portal's own serving path (admission.services on the test's in-process store) behind the
    interface the middleware takes (AdmissionClient / Library), answering as they do."""

    def reserve(self, **kw):
        from admission import services
        from admission.client import QUOTA_KEY

        req = services.parse_reserve({k: v for k, v in kw.items() if v is not None})
        d = services.reserve(req)
        return {**d.body, QUOTA_KEY: d.headers} if d.headers else d.body

    def complete(self, reservation_id, **kw):
        from admission import services

        body = {"reservation_id": reservation_id, **{k: v for k, v in kw.items() if v is not None}}
        return services.complete(services.parse_complete(body))[1]


def test_the_middleware_sends_headrooms_quota_not_the_upstreams(w, sink, monkeypatch):
    import asyncio

    import httpx

    from admission.asgi import AdmissionMiddleware

    async def upstream(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"x-ratelimit-remaining-tokens", b"999999"),
            (b"x-upstream", b"kept")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b'{"usage": {"prompt_tokens": 200, "completion_tokens": 5}}'})

    # Not offloaded, so the portal's snapshot reads stay on the test's thread (its database transaction).
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")
    app = AdmissionMiddleware(upstream, InProcess(), offload=False)
    hdrs = {"x-headroom-tenant": "acme", "x-headroom-region": "tiny-region", "x-headroom-traffic-class": "reserved",
            "x-headroom-prompt-tokens": "200"}  # fmt: skip

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
            ok = await c.post("/v1/chat/completions", json={"model": "llama-test", "max_tokens": 200},
                              headers={**hdrs, "x-request-id": "m1"})  # fmt: skip
            big = await c.post("/v1/chat/completions", json={"model": "llama-test", "max_tokens": 200},
                               headers={**hdrs, "x-request-id": "m2", "x-headroom-prompt-tokens": "20000"})  # fmt: skip
            return ok, big

    params.invalidate()
    assert params.current().lookup("acme", "", "llama-test", "tiny-region", "reserved") is not None
    ok, big = asyncio.run(go())
    assert ok.status_code == 200 and ok.headers["x-upstream"] == "kept", ok.text
    # 200 + 4 × 200 = 1,000 wt from acme's 12,000: the upstream's own figure is gone, ours is sent once
    assert ok.headers.get_list("x-ratelimit-remaining-tokens") == ["11000"]
    assert ok.headers["x-ratelimit-limit-tokens"] == "12000"
    assert big.status_code == 429 and big.json()["reason"] == "OUTSIDE_ENVELOPE"
    assert "x-ratelimit-remaining-tokens" not in big.headers  # decided without the store
