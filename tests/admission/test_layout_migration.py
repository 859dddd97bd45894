"""A store written by the layout before issue 49.1 is read by the new scripts on deploy, with no step
of its own (docs/operations.md, "The admission store's Redis layout"): no in-flight reservation is lost.

The old scripts (tests/admission/old_layout/, commit ead91d8: the same arguments in the same order)
fill Redis: reservations in flight, bucket levels, a request-rate bucket under its own key, a period
budget, zsets listed for the sweep by every reserve and unlisted when emptied. The backend then
switches to the new scripts, as a deployed process runs them: the levels carry over, the old
reservations complete, expire on access and are swept, and the request-rate bucket moves into the
scope's hash with its level. Every bucket rate is 0, so levels are exact.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from admission import keys
from admission.backends import inputs
from admission.backends.base import NO_OUTPUT_CAP, Bucket, CompleteOp, Limits, Period, ReserveOp, Scope, Where
from admission.backends.redis import US_MIN
from admission.backends.redis_calls import Script
from capacity import periods as limits
from tests.admission.cluster import store_url
from tests.admission.conftest import redis_backend

pytestmark = pytest.mark.redis
OLD = Path(__file__).with_name("old_layout")


LAYOUT_49_1 = Path(__file__).with_name("layout_49_1")  # in-flight zsets scored in seconds


class OldScript(Script):
    """A script of an earlier layout (its preamble: the inputs table, unchanged since); `where`: its sources."""

    def __init__(self, name: str, where: Path = OLD) -> None:  # noqa: D107 - Script's fields, from the old sources
        import hashlib

        pre = inputs.lua_preamble() if name == "reserve" else ""
        self.source = ((where / "lib.lua").read_text() + "\n" + pre + (where / f"{name}.lua").read_text()).encode()
        self.sha = hashlib.sha1(self.source).hexdigest().encode()  # noqa: S324  (Redis names scripts by SHA-1)


def _scope(t: str, name: str, *, ttl: float, limited: bool = False, maxc: int = 4) -> Scope:
    lim = None
    if limited:
        lim = Limits(
            "wt", "UTC", (Period(limits.DAILY, f"{t}bd:{name}:d", 10_000.0),), Bucket(f"{t}rq:{name}", 0.0, 10.0)
        )
    return Scope(
        inflight_key=keys.inflight(t, name), max_concurrency=maxc, traffic_class="reserved",
        own=Bucket(keys.own(t, name), 0.0, 100_000.0), pool=Bucket(keys.pool(t), 0.0, 1_000_000.0), borrow=None,
        margin=0.0, degraded=False, reserved_floor=0.0, ttl_s=ttl, idem_ttl_s=60, w_out=4.0, w_cached=0.5,
        max_output=NO_OUTPUT_CAP, limits=lim, tag=t,
    )  # fmt: skip


def _reserve(b, s: Scope, cost: float = 100.0):
    return b.reserve(ReserveOp(s, uuid.uuid4().hex, cost, json.dumps({"scope": s.inflight_key}), units=cost))


def _rid(a) -> str:
    return a.raw.split("|")[1]


@pytest.fixture
def backend(redis_url):
    b = redis_backend(store_url(redis_url))
    yield b
    b.clear()


def test_a_store_the_old_layout_wrote_is_read_on_deploy_and_loses_no_reservation(backend):
    b = backend
    t = keys.tag(b.prefix, "mig")
    held = _scope(t, "held", ttl=600.0, limited=True)  # in flight across the deploy
    short = _scope(t, "short", ttl=1.0)  # past its TTL after the deploy: expires on access
    idle = _scope(t, "idle", ttl=1.0)  # past its TTL, no more traffic: the sweep settles it
    new_reserve, new_expire = b._reserve, b._expire
    b._reserve, b._expire = OldScript("reserve"), OldScript("expire")

    old_held = [_reserve(b, held) for _ in range(3)]
    old_short = [_reserve(b, short) for _ in range(2)]
    old_idle = _reserve(b, idle)
    assert all(a.admitted for a in (*old_held, *old_short, old_idle))
    rq = held.limits.rps.key  # type: ignore[union-attr]
    assert b.client.exists(rq) and b.level(rq) == 7.0  # the old layout: a key of its own, 10 − 3 requests
    assert b.level(held.own.key) == 100_000.0 - 300.0
    assert b.level(held.pool.key) == 1_000_000.0 - 600.0
    day = [k.decode() for k in b.client.scan_iter(match=f"{held.limits.periods[0].key}:*")]  # type: ignore[union-attr]
    assert len(day) == 1 and float(b.client.get(day[0])) == 300.0  # the old layout: the period's own key
    # As a gateway's complete names them (admission.settle.where: from the signed id).
    where = Where(t, held.inflight_key, held.own.key, held.pool.key, held.limits)

    # Deploy: the same store, the new scripts. Nothing is rewritten beforehand.
    b._reserve, b._expire = new_reserve, new_expire
    assert b.level(held.own.key) == 100_000.0 - 300.0 and b.level(rq) == 7.0  # levels carry over

    # An old reservation completes against the new layout: refunded to its buckets and its period.
    done = b.complete(CompleteOp(_rid(old_held[0]), 10, 0, 10, "ok", 60, where=where))
    assert done is not None and done.result["actual_wt"] == 50.0 and done.result["refunded_wt"] == 50.0
    assert b.level(held.own.key) == 100_000.0 - 250.0 and b.used(day[0]) == 250.0

    # A new reserve counts the two still in flight (the concurrency cap is 4), and moves the request-rate
    # bucket into the scope's hash with its level.
    a = _reserve(b, held)
    assert a.admitted and a.in_flight == 3
    assert not b.client.exists(rq) and b.level(rq) == 6.0
    # ...and the period's spend, with what it held (300 less the 50 refunded): the key goes, a field stays.
    assert not b.client.exists(day[0]) and b.used(day[0]) == 350.0
    assert b.client.hget(held.own.key, day[0]) == b"350"
    assert _reserve(b, held).admitted and _reserve(b, held).raw.startswith("T|CONCURRENCY_LIMIT")
    assert b.used(day[0]) == 100.0 * 5 - 50.0  # 3 old (one settled at 50) + 2 new

    time.sleep(1.2)  # the short and idle scopes' reservations are past their TTL
    # Expire on access: the old layout's zset has no bound in the scope's hash, so it is read.
    got = _reserve(b, short)
    assert got.admitted and got.in_flight == 1 and len(got.expired_metas) == 2
    assert b.level(short.own.key) == 100_000.0 - 300.0  # the expired ones were charged their estimate

    # The idle scope's zset was listed by the old reserve: the new sweep finds it.
    metas = b.sweep()
    assert [json.loads(m)["scope"] for m in metas] == [idle.inflight_key]
    assert b.inflight(idle.inflight_key) == 0 and b.inflight(held.inflight_key) == 4

    # The old ones left in flight complete as any other: their refund reaches the period's field (their
    # records name only the period's key; the complete names the scope's hash).
    for x in old_held[1:]:
        assert b.complete(CompleteOp(_rid(x), 40, 0, 0, "ok", 60, where=where)) is not None
    assert b.inflight(held.inflight_key) == 2
    assert b.used(day[0]) == 450.0 - 2 * 60.0 and not b.client.exists(day[0])
    assert b.level(held.pool.key) == 1_000_000.0 - 900.0 + 50.0 + 120.0  # 9 admitted at 100, 3 settled below


def test_a_scope_first_seen_by_the_new_layout_is_listed_for_the_sweep_once(backend):
    """The zset is listed with the scope's first admission and stays listed when it empties (expire.lua
    no longer unlists it, as reserve.lua no longer lists it with every reservation)."""
    b = backend
    t = keys.tag(b.prefix, "lst")
    s = _scope(t, "s", ttl=1.0)
    ifs = keys.inflight_sets(t)
    first = _reserve(b, s)
    assert first.admitted and b.client.smembers(ifs) == {s.inflight_key.encode()}
    time.sleep(1.2)
    assert len(b.sweep()) == 1 and b.inflight(s.inflight_key) == 0
    assert b.client.smembers(ifs) == {s.inflight_key.encode()}  # still listed, empty
    again = _reserve(b, s)
    time.sleep(1.2)
    assert again.admitted and len(b.sweep()) == 1  # a later abandoned reservation is still swept


def test_a_zset_an_old_process_unlisted_during_a_rolling_deploy_is_listed_again_by_the_deploy_step(backend):
    """Old and new processes side by side: an old expire.lua unlists the zset it empties, the new reserve
    (the scope's hash has its bound) does not list it again, so the sweep would miss a reservation
    abandoned there; `admission_relist_inflight` (RedisBackend.relist_inflight) lists it again."""
    b = backend
    t = keys.tag(b.prefix, "roll")
    s = _scope(t, "s", ttl=1.0)
    ifs = keys.inflight_sets(t)
    first = _reserve(b, s)
    assert b.complete(CompleteOp(_rid(first), 1, 0, 1, "ok", 60, where=Where(t))) is not None
    b._eval(OldScript("expire"), 2, (s.inflight_key, ifs))  # an old process's sweep: the empty zset unlisted
    assert b.client.smembers(ifs) == set()
    assert _reserve(b, s).admitted  # abandoned
    time.sleep(1.2)
    assert b.sweep() == []  # not listed: missed
    assert b.relist_inflight() == 1 and b.relist_inflight() == 0
    assert len(b.sweep()) == 1 and b.inflight(s.inflight_key) == 0


def test_the_relist_command_runs_on_the_store_in_use(backend):
    from io import StringIO

    from django.core.management import call_command

    from admission import backends

    prev = backends.set_backend(backend)
    try:
        out = StringIO()
        call_command("admission_relist_inflight", stdout=out)
        assert out.getvalue() == "in-flight zsets listed again: 0\n"
    finally:
        backends.set_backend(prev)


def test_a_budgets_older_periods_leave_the_scopes_hash_at_a_periods_first_spend(backend):
    """A period's spend stays a field of the scope's hash past its end (the previous period's is still
    read), until a later period's first spend removes the fields of the periods before the previous one."""
    b = backend
    t = keys.tag(b.prefix, "old")
    s = _scope(t, "s", ttl=600.0, limited=True)
    stem = s.limits.periods[0].key  # type: ignore[union-attr]

    def fields() -> list[str]:
        return sorted(f.decode()[len(stem) + 1 :] for f in b.client.hkeys(s.own.key) if f.decode().startswith(stem))

    days = []
    for shift in range(4):  # the keys are named for days ahead; Redis' clock picks the current one
        b.period_offset_s = shift * 86400.0
        assert _reserve(b, s).admitted  # four in all: the concurrency cap
        days.append(fields()[-1])
        assert b.used(f"{stem}:{days[-1]}") == 100.0
    assert fields() == days[2:]  # the last two days' spend; the older ones went


def test_a_zset_scored_in_seconds_and_an_old_process_in_a_rolling_deploy_lose_no_reservation(backend):
    """Issue 49.1's layout scored an in-flight reservation by its expiry in seconds, the new one in whole
    microseconds (lib.lua: US_MIN). A zset holding both (written before the deploy, or by a process of the
    layout before still running beside the new ones) is counted, expired and swept by each member's own
    unit: a member in seconds is never taken for one long past its TTL."""
    b = backend
    t = keys.tag(b.prefix, "us")
    short, long = _scope(t, "s", ttl=1.0, maxc=6), _scope(t, "s", ttl=600.0, maxc=6)  # one scope, two TTLs
    new_reserve = b._reserve
    prev = OldScript("reserve", LAYOUT_49_1)
    b._reserve = prev
    before = [_reserve(b, short) for _ in range(2)] + [_reserve(b, long)]  # in seconds
    b._reserve = new_reserve
    mine = _reserve(b, short)
    b._reserve = prev  # a process of the layout before, still running: a long one in seconds beside it
    beside = _reserve(b, long)
    b._reserve = new_reserve
    assert all(a.admitted for a in (*before, mine, beside)) and mine.in_flight == 4
    scores = {_rid(a): b.client.zscore(long.inflight_key, _rid(a)) for a in (*before, mine, beside)}
    assert scores[_rid(mine)] >= US_MIN and scores[_rid(mine)] == int(scores[_rid(mine)])
    assert all(scores[_rid(a)] < US_MIN for a in (*before, beside))

    time.sleep(1.2)  # the short ones are past their TTL, in either unit; the long ones are not
    got = _reserve(b, long)
    assert got.admitted and got.in_flight == 3  # the two long ones in seconds still hold their slots, and this one
    assert sorted(got.expired_metas) == [json.dumps({"scope": short.inflight_key})] * 3
    for a in (before[2], beside):  # still open: they complete, not expire
        done = b.complete(CompleteOp(_rid(a), 10, 0, 10, "ok", 60, where=Where(t)))
        assert done is not None and done.result["status"] == "ok"
    assert b.inflight(long.inflight_key) == 1

    # The sweep, in either unit: an abandoned one in seconds and one in microseconds; the long one stays.
    idle_new = _reserve(b, short)
    b._reserve = prev
    idle_old = _reserve(b, short)
    b._reserve = new_reserve
    assert idle_new.admitted and idle_old.admitted
    time.sleep(1.2)
    assert len(b.sweep()) == 2 and b.sweep() == []
    assert b.inflight(long.inflight_key) == 1
    assert b.complete(CompleteOp(_rid(got), 1, 0, 1, "ok", 60, where=Where(t))).result["status"] == "ok"  # type: ignore[union-attr]
