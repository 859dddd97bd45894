"""Sweep S1 (issue 38): a complete that arrives after its period's boundary changes nothing in the period
it was charged to: the day that ended keeps its estimate (and the new day its own use). In-process
store with a held clock; test_budget_contract covers the new day on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

from admission.backends.memory import MemoryBackend
from tests.admission.test_budget_contract import Clock, before, complete, lop, used


def test_a_late_complete_leaves_the_ended_day_at_its_estimate():
    store = MemoryBackend()
    clock = Clock(store)
    b = before(clock, datetime(2026, 12, 16, tzinfo=UTC))
    a = store.reserve(lop(store, cost=600.0, daily=1000))
    assert used(store, clock) == 600.0
    yesterday = clock.now()
    clock.past(b)
    assert complete(store, a.parts()[1], prompt=1, output=0) is not None  # 599 would come back, but too late
    clock.at(yesterday)
    assert used(store, clock) == 600.0  # the ended day stands as it was charged
    clock.past(b)
    assert used(store, clock) is None  # and the new day was not touched either
