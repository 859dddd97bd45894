"""Issues 49.1 and 50.1: the reserve's inputs are named once (admission/backends/inputs.py), and the three
places that decide a reserve (base.decide, the in-process backend, reserve.lua) read the same names and
reach the same decision on generated states, on both stores."""

from __future__ import annotations

import inspect
import random
import re
import uuid

import pytest

from admission.backends import base, inputs, memory, memory_fair, redis_calls
from admission.backends.base import Bucket, ReserveOp, Scope, decide, retry_after_s
from tests.admission.test_backend_contract import _decision, prefixed

LUA = redis_calls.LUA / "reserve.lua"
READ = re.compile(r"\b([AK])_([a-z_]+)\b")


def _body() -> str:
    """reserve.lua's code, comments left out."""
    return "\n".join(line.split("--", 1)[0] for line in LUA.read_text().splitlines())


def test_the_script_body_reads_no_argument_or_key_by_number():
    body = _body()
    assert not re.search(r"\b(ARGV|KEYS)\b", body)  # (a command's name, HKEYS, is not a read of KEYS)


def test_the_preamble_reads_each_argument_and_key_by_number_once():
    pre = inputs.lua_preamble()
    got = re.findall(r"ARGV\[(\d+)\]", pre)
    assert len(got) == len(set(got))
    assert sorted(int(n) for n in got) == list(range(1, len(got) + 1))  # every position, once
    ks = re.findall(r"KEYS\[(\d+)\]", pre)
    assert len(ks) == len(set(ks)) == len(inputs.KEYS) + 1  # K_rq; the periods' keys and K_keep by offset


def test_the_script_reads_the_tables_names_and_every_one_of_them():
    body = _body()
    args = {n for k, n in READ.findall(body) if k == "A"}
    keys = {n for k, n in READ.findall(body) if k == "K"}
    assert args <= inputs.names(), args - inputs.names()
    assert keys <= {*inputs.KEYS, "rq", "keep"}, keys
    # Every argument the table sends is read (n_periods by the preamble's loop): none is sent for nothing.
    sent = {n for n, _ in (*inputs.PER_CALL, *inputs.STATIC, *inputs.LIMITS)} - {"n_periods"}
    read = {n.removesuffix("_s") for n in args} | {n for n in args if n in sent}
    assert sent <= read, sent - read


def test_python_reads_the_same_names():
    """base.decide and the in-process backend (its lending and fair-share accounts too) read a scope's
    inputs as inputs.of(scope)[<name>]."""
    static = {n for n, _ in inputs.STATIC}
    for src in (inspect.getsource(base.decide), inspect.getsource(memory), inspect.getsource(memory_fair)):
        used = set(re.findall(r'\bv\["([a-z_]+)"\]', src))
        assert used and used <= static, used - static
    # decide reads only table names: every one it needs is in the table the script gets.
    assert set(re.findall(r'\bv\["([a-z_]+)"\]', inspect.getsource(base.decide))) == {
        "margin", "degraded", "traffic_class", "reserved_floor", "own_rate", "borrow_depth", "borrow_rate",
    }  # fmt: skip


def test_the_wire_order_is_the_tables():
    s = _scope(random.Random(1), "w")
    assert inputs.static_wire(s)[:3] == [s.traffic_class, str(s.max_concurrency), repr(s.own.rate)]
    # The LAZY numbers travel as one argument, in the table's order (the preamble splits them).
    wire = inputs.static_wire(s)
    assert len(wire) == len(inputs.STATIC) - len(inputs.LAZY) + 1
    names = [n for n, _ in inputs.STATIC if n not in inputs.LAZY or n == inputs.LAZY_ORDER[0]]
    v = inputs.of(s)
    assert wire[names.index(inputs.LAZY_ORDER[0])].split("\t") == [inputs.wire(n, v[n]) for n in inputs.LAZY_ORDER]
    # A scope that cannot borrow never writes a borrowed record: its middle is not sent.
    assert wire[names.index("record_borrowed")] == (
        "" if s.borrow is None or not s.borrow.depth > 0 else v["record_borrowed"]
    )


# ---- the same decision on generated states ---------------------------------------------------------


def _scope(rng: random.Random, name: str) -> Scope:
    """A scope whose buckets are untouched (so each is at its depth, the level the case wants, whatever its
    rate): levels around the cost, rates that give a wait, borrowing or not, degraded or not."""

    def depth():
        return rng.choice([0.0, 50.0, 99.0, 100.0, 100.5, 150.0, 250.0, 1000.0])

    borrow = rng.random() < 0.6
    return Scope(
        inflight_key=f"if:{name}",
        max_concurrency=100,
        traffic_class=rng.choice([base.RESERVED, base.SHARED, base.BEST_EFFORT]),
        own=Bucket(f"b:{name}", rng.choice([0.0, 3.0, 10.0]), depth()),
        pool=Bucket(f"p:{name}", 5.0, depth()),
        borrow=Bucket(f"bb:{name}", rng.choice([0.0, 2.0, 7.0]), rng.choice([0.0, *[depth()] * 3])) if borrow else None,
        margin=rng.choice([0.0, 20.0, 200.0]),
        degraded=rng.random() < 0.3,
        reserved_floor=rng.choice([0.0, -100.0, -1000.0]),
        ttl_s=600.0,
        idem_ttl_s=60,
        w_out=4.0,
        w_cached=0.5,
    )


def _expected(o: ReserveOp):
    s = o.scope
    b = s.borrow
    verdict, what, wait = decide(o, s.own.depth, s.pool.depth, b.depth if b else 0.0)
    if verdict == "admit":
        return ("A", what)
    return f"T|{what}|{retry_after_s(what, wait, s.retry_defaults)}"


@pytest.mark.parametrize("which", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_decide_the_in_process_store_and_the_script_decide_alike(which, request):
    if which == "memory":
        store = memory.MemoryBackend()
    else:
        from tests.admission.cluster import store_url
        from tests.admission.conftest import redis_backend

        store = redis_backend(store_url(request.getfixturevalue("redis_url")))
    rng = random.Random(4950)
    try:
        seen = set()
        for i in range(300):
            o = ReserveOp(_scope(rng, f"g{i}"), uuid.uuid4().hex, rng.choice([1.0, 50.0, 100.0, 150.0]), "{}")
            want = _expected(o)
            got = _decision(store.reserve(prefixed(store, o)))
            assert got == want, (i, o)
            seen.add(want if isinstance(want, tuple) else want.split("|")[1])
        # The generated states reach every outcome decide has.
        assert seen == {("A", "entitlement"), ("A", "borrowed"), "QUOTA_EXCEEDED", "RECLAIMED", "PLATFORM_CAPACITY"}
    finally:
        store.clear()
