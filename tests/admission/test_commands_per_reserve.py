"""Redis commands per admitted reserve (issue 49.1): a count, not a time, so it is exact whatever the load.

INFO commandstats counts every command a script runs. The server is a private redis-server started for
this module (on a unix socket: no port to collide with, no other client to count), as the shared one
counts every helper's commands. The web tier's own part is one EVALSHA (tests/admission/test_round_trips.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid

import pytest
import redis

from admission.backends.base import NO_OUTPUT_CAP, Bucket, CompleteOp, Limits, Period, ReserveOp, Scope, Where
from admission.backends.redis import RedisBackend
from capacity import periods as limits

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary"),
]

PLAIN_GOAL = 9  # issue 49: ≤ 9 (11 before)
# A request rate and two period budgets: the same 9, as they are fields of the scope's hash (17 before).
BUDGETED_NOW = 9


@pytest.fixture(scope="module")
def private(tmp_path_factory):
    d = tmp_path_factory.mktemp("redis-private")
    sock = d / "r.sock"
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(sock), "--save", "", "--appendonly", "no", "--dir", str(d)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    r = redis.Redis(unix_socket_path=str(sock))
    for _ in range(200):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield f"unix://{sock}", r
    proc.terminate()
    proc.wait(10)


def _scope(t: str, *, budgeted: bool, ttl: float = 600.0) -> Scope:
    lim = None
    if budgeted:
        periods = (Period(limits.DAILY, f"{t}bd:s:d", 1e15), Period(limits.MONTHLY, f"{t}bd:s:m", 1e15))
        lim = Limits("wt", "UTC", periods, Bucket(f"{t}rq:s", 1e6, 1e9))
    return Scope(
        inflight_key=f"{t}if:s", max_concurrency=10**6, traffic_class="reserved", own=Bucket(f"{t}b:s", 0.0, 1e15),
        pool=Bucket(f"{t}p", 0.0, 1e15), borrow=None, margin=0.0, degraded=False, reserved_floor=0.0, ttl_s=ttl,
        idem_ttl_s=60, w_out=4.0, w_cached=0.5, max_output=NO_OUTPUT_CAP, limits=lim, tag=t,
    )  # fmt: skip


def _inner(r: redis.Redis) -> int:
    """Every command counted but the scripts' own EVALSHA and INFO (and the backend's sweep-list SADD,
    which is outside the script, once a minute per pool)."""
    return sum(
        int(v["calls"])
        for k, v in r.info("commandstats").items()
        if k not in ("cmdstat_evalsha", "cmdstat_info", "cmdstat_script|load")
    )


def _reserve(b: RedisBackend, s: Scope, epoch: str | None = None):
    meta = json.dumps({"scope": "s"})
    return b.reserve(ReserveOp(s, uuid.uuid4().hex, 100.0, meta, units=100.0, quota=True, epoch=epoch))


def _per_reserve(url: str, r: redis.Redis, *, budgeted: bool, n: int = 20, http: bool = False) -> float:
    """`http`: as the web tier calls it, with the token-revocation epoch its token check was made under
    (checked in the same script: read with the record in one MGET)."""
    t = f"c{uuid.uuid4().hex[:6]}{{p1}}:"
    b = RedisBackend(url, prefix=t)
    s = _scope(t, budgeted=budgeted)
    epoch = None
    if http:
        b.bump_epoch()
        epoch = b.current_epoch()
    assert _reserve(b, s, epoch).raw.startswith("A|")  # the first: loads the script, lists the zset
    before = _inner(r)
    for _ in range(n):
        assert _reserve(b, s, epoch).raw.startswith("A|")
    return (_inner(r) - before) / n


def test_a_plain_admitted_reserve_runs_at_most_nine_commands(private):
    url, r = private
    assert _per_reserve(url, r, budgeted=False) == PLAIN_GOAL


def test_a_budgeted_admitted_reserve_runs_nine_commands_too(private):
    url, r = private
    assert _per_reserve(url, r, budgeted=True) == BUDGETED_NOW


def test_the_web_tiers_epoch_check_adds_no_command(private):
    url, r = private
    assert _per_reserve(url, r, budgeted=False, http=True) == PLAIN_GOAL
    assert _per_reserve(url, r, budgeted=True, http=True) == BUDGETED_NOW


def test_the_in_flight_zset_is_read_only_when_something_may_be_due(private):
    """ZCARD on every reserve; ZCOUNT and ZRANGEBYSCORE only while a reservation may be past its TTL
    (the scope's hash holds a lower bound on the zset's expiries), and such a one is still handed back."""
    url, r = private
    t = f"d{uuid.uuid4().hex[:6]}{{p1}}:"
    b = RedisBackend(url, prefix=t)
    short = _scope(t, budgeted=False, ttl=0.3)
    first = _reserve(b, short)

    def zreads() -> int:
        st = r.info("commandstats")
        return sum(int(st.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("zcount", "zrangebyscore"))

    z0 = zreads()
    assert _reserve(b, short).in_flight == 2
    assert zreads() == z0  # nothing due: the zset is not walked
    time.sleep(0.4)
    got = _reserve(b, short)
    assert zreads() == z0 + 2  # both may be due now: counted and handed back (expire on access)
    assert len(got.expired_metas) == 2 and got.in_flight == 1
    # The expired ones left the zset: nothing due until the new one's TTL.
    z1 = zreads()
    assert b.complete(CompleteOp(got.raw.split("|")[1], 1, 0, 1, "ok", 60, where=Where(t))) is not None
    assert first.raw.startswith("A|") and _reserve(b, short).in_flight == 1
    assert zreads() == z1
