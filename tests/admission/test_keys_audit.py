"""Every key a script touches is passed in KEYS (docs/contract.md §5, Redis Cluster; issue 20.2).

The scripts run here with an audit in front of them: a local `redis` that refuses any command on a
key not in KEYS. Every path of the serving path goes through them against real Redis: admit,
throttle, borrow, settle, replay, expiry on access, the pool's sweep, a forgotten record settled
from its signed id, and a scope with period budgets and a request rate. A script that built a key
(as complete.lua once reached the in-flight zset through the record) fails with the key's name.
"""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest

from admission import backends, events, keys, params, services
from admission.backends.redis import RedisBackend
from admission.backends.redis_calls import Script
from entitlements.services import entitlement_amend
from tests.admission.cluster import store_url
from tests.admission.world import body, build_world

pytestmark = pytest.mark.redis

AUDIT = """
local declared = {}
for _, k in ipairs(KEYS) do declared[k] = true end
local real = redis
local redis = setmetatable({call = function(cmd, ...)
  local key = ...
  if cmd ~= 'TIME' and not declared[key] then
    error('undeclared key ' .. tostring(key) .. ' in ' .. cmd)
  end
  return real.call(cmd, ...)
end}, {__index = real})
"""


class Audited(Script):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.source = AUDIT.encode() + self.source
        self.sha = hashlib.sha1(self.source).hexdigest().encode()  # noqa: S324


@pytest.fixture
def audited(fleet, sink, redis_url, settings):

    b = RedisBackend(store_url(redis_url), prefix=f"audit{uuid.uuid4().hex[:6]}:", socket_timeout=2.0)
    b._reserve, b._complete, b._expire = Audited("reserve"), Audited("complete"), Audited("expire")
    prev = backends.set_backend(b)
    params.invalidate()
    yield build_world(fleet), b
    b.clear()
    backends.set_backend(prev)
    params.invalidate()


def reserve(b: dict) -> services.Decision:
    return services.reserve(services.parse_reserve(b))


def complete(rid: str, output: int = 50) -> tuple[int, dict]:
    return services.complete(services.parse_complete({"reservation_id": rid, "prompt_tokens": 200,
                                                      "output_tokens": output, "status": "ok"}))  # fmt: skip


def test_every_path_touches_only_the_keys_it_was_given(audited, sink, settings):
    w, store = audited
    # The lender has period budgets and a request rate: their keys go through KEYS on every path below.
    # It also lends at most 0.1 of its 0.2 CU (issue 36.3): borrowers go through the pool's lend bucket
    # and its fair-share table.
    entitlement_amend(actor=w.fleet.operator, reason="audit", entitlement=w.lender, daily_budget=10**9,
                      monthly_budget=10**9, max_rps=1000, burst=1000, lending_limit_cu="0.1")  # fmt: skip
    params.invalidate()
    # Expiry: on access (a reserve hands its scope's due ids to expire.lua) and by the pool's sweep.
    settings.ADMISSION_RESERVATION_TTL_S = 0.05
    reserve(body("globex", "best_effort", "late-1", prompt=10, out=10))
    time.sleep(0.1)
    reserve(body("globex", "best_effort", "late-2", prompt=10, out=10))  # expires late-1 on access
    time.sleep(0.1)
    assert services.sweep() >= 1  # late-2 (and the acme reservations are still live)
    settings.ADMISSION_RESERVATION_TTL_S = 600
    events.buffer().flush()
    assert {e["event_id"] for e in sink.of("complete") if e["status"] == "expired"} >= {
        "late-1:complete",
        "late-2:complete",
    }

    # globex's own bucket holds 3,000 (less the 100 above): its last 1,000-wt requests borrow; settled against the borrow bucket.
    got = [reserve(body("globex", "best_effort", f"b{i}")) for i in range(4)]
    borrowed = [d for d in got if d.body["source"] == "borrowed"]
    assert borrowed and complete(borrowed[0].body["reservation_id"])[1]["status"] == "ok"
    tag = keys.tag(store.prefix, w.pool.pk)
    assert store.level(keys.lend(tag)) is not None and store.client.hlen(keys.fair(tag)) == 1
    ok = [reserve(body("acme", "reserved", f"a{i}")) for i in range(12)]  # own bucket 12,000: 12 × 1,000
    assert {d.status for d in ok} == {200}
    assert reserve(body("acme", "reserved", "a-over")).body["reason"] == "QUOTA_EXCEEDED"
    assert reserve(body("globex", "best_effort", "g1", prompt=400, out=400)).status == 429  # drained
    assert complete(ok[0].body["reservation_id"])[0] == 200
    assert complete(ok[0].body["reservation_id"])[0] == 200  # a replay
    assert reserve(body("acme", "reserved", "a0")).body["settled"] is True
    # A record the store lost: settled from its signed id against the buckets it names.
    rid = services.reservation_id(services.ids.record_key(), "acme", "a1")
    store.client.delete(keys.record(keys.tag(store.prefix, w.pool.pk), rid))
    status, got = complete(ok[1].body["reservation_id"])
    assert status == 200 and got["status"] == "ok"


def test_the_audit_refuses_a_key_built_inside_a_script(audited):
    """Negative control: a complete.lua that names a key from the record (as it once reached the
    in-flight zset through it) is refused by the audit, naming the key."""
    w, store = audited
    d = reserve(body("acme", "reserved", "nc"))
    legacy = Audited("complete")
    legacy.source = legacy.source.replace(b"redis.call('ZREM', KEYS[2], rid)\nlocal result",
                                          b"redis.call('ZREM', f[3] .. ':x', rid)\nlocal result")  # fmt: skip
    legacy.sha = hashlib.sha1(legacy.source).hexdigest().encode()  # noqa: S324
    store._complete = legacy
    with pytest.raises(Exception, match="undeclared key"):
        complete(d.body["reservation_id"])
