"""Issue 38: on Redis, the store's own clock picks which period bucket a reserve charges.

The caller sends each period's previous, current and next key, named around its own clock, with the
boundaries; reserve.lua picks by Redis' TIME. A web process whose clock is a few seconds off must still
charge the period Redis is in. Mutation M4 makes the script always take the caller's current one.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from entitlements import limits
from tests.admission.cluster import store_url
from tests.admission.conftest import redis_backend
from tests.admission.test_budget_contract import lop

BOUNDARY = datetime(2026, 12, 16, tzinfo=UTC).timestamp()  # a UTC midnight, virtual
SKEW_S = 10.0  # how far the caller's clock is off
MARGIN_S = 5.0  # how far from the boundary Redis' (virtual) clock sits while the test runs


@pytest.fixture
def store(redis_url):
    b = redis_backend(store_url(redis_url))
    yield b
    b.clear()


def _day_key(store, t: float) -> str:
    pid = limits.period_id(limits.DAILY, limits.period_start(limits.DAILY, t, "UTC"))
    return f"{store.prefix}bd:s1:d:{pid}"


def _skewed(store, monkeypatch, *, redis_at: float, caller_off_s: float) -> None:
    """Redis' clock at virtual `redis_at`; the caller's `caller_off_s` from it."""
    store.period_offset_s = redis_at - time.time()
    monkeypatch.setattr(store, "period_now", lambda: time.time() + store.period_offset_s + caller_off_s)


@pytest.mark.redis
def test_a_caller_behind_redis_past_midnight_charges_the_new_day(store, monkeypatch):
    _skewed(store, monkeypatch, redis_at=BOUNDARY + MARGIN_S, caller_off_s=-SKEW_S)  # caller: 23:59:55
    assert store.reserve(lop(store, cost=300.0, daily=1000)).admitted
    assert store.used(_day_key(store, BOUNDARY + 1)) == 300.0  # the day Redis is in
    assert store.used(_day_key(store, BOUNDARY - 1)) is None  # not the caller's (yesterday)
    t = store.reserve(lop(store, cost=701.0, daily=1000)).raw
    # spent to the new day's end: a day less the few seconds Redis is past midnight
    assert t.startswith("T|BUDGET_EXHAUSTED|") and 86400 - 2 * MARGIN_S <= int(t.split("|")[2]) <= 86400


@pytest.mark.redis
def test_a_caller_ahead_of_redis_before_midnight_charges_the_old_day(store, monkeypatch):
    _skewed(store, monkeypatch, redis_at=BOUNDARY - MARGIN_S, caller_off_s=SKEW_S)  # caller: 00:00:05
    assert store.reserve(lop(store, cost=1000.0, daily=1000)).admitted
    assert store.used(_day_key(store, BOUNDARY - 1)) == 1000.0  # the day Redis is still in
    assert store.used(_day_key(store, BOUNDARY + 1)) is None  # tomorrow untouched
    t = store.reserve(lop(store, cost=1.0, daily=1000)).raw
    assert t.startswith("T|BUDGET_EXHAUSTED|") and 1 <= int(t.split("|")[2]) <= MARGIN_S  # to Redis' midnight
