"""The one-sweep peak against the brute force it replaced (re-sum at every start instant).

Times are drawn from a small grid of hours so windows and entitlements touch often: an
entitlement ending at t and one starting at t must not be summed together.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from entitlements.models import Entitlement
from entitlements.selectors import Window, peak_sold, pool_sold_peak, sold_steps_in
from tests.factories import ENVELOPE

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def brute_peak(rows, window):
    """The O(n²) original, kept verbatim as the oracle."""
    rows = list(rows)
    instants = {window.start} | {s for s, _, _ in rows if s > window.start and (window.end is None or s < window.end)}
    best = Decimal(0)
    for t in instants:
        total = sum((cu for s, e, cu in rows if s <= t and (e is None or e > t)), Decimal(0))
        best = max(best, total)
    return best


def brute_sold_at(rows, t):
    return sum((cu for s, e, cu in rows if s <= t and (e is None or e > t)), Decimal(0))


hour = st.integers(min_value=0, max_value=12).map(lambda h: T0 + timedelta(hours=h))
cu = st.integers(min_value=1, max_value=5000).map(lambda n: Decimal(n) / 10)


@st.composite
def row(draw):
    s = draw(hour)
    length = draw(st.none() | st.integers(min_value=1, max_value=8))
    return (s, None if length is None else s + timedelta(hours=length), draw(cu))


@st.composite
def window(draw):
    s = draw(hour)
    length = draw(st.none() | st.integers(min_value=1, max_value=8))
    return Window(s, None if length is None else s + timedelta(hours=length))


@settings(max_examples=600, deadline=None)
@given(rows=st.lists(row(), max_size=25), w=window())
def test_sweep_peak_equals_brute_force(rows, w):
    assert peak_sold(rows, w) == brute_peak(rows, w)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(row(), max_size=25), w=window())
def test_every_step_is_sold_at_its_instant(rows, w):
    steps = sold_steps_in(rows, w)
    assert steps[0][0] == w.start
    assert [t for t, _ in steps] == sorted({t for t, _ in steps})
    for t, total in steps:
        assert total == brute_sold_at(rows, t)


def test_ending_at_t_and_starting_at_t_are_not_summed():
    t = T0 + timedelta(hours=2)
    rows = [(T0, t, Decimal("100")), (t, None, Decimal("80"))]
    assert peak_sold(rows, Window(T0, None)) == Decimal("100")
    assert peak_sold(rows, Window(t, None)) == Decimal("80")
    assert sold_steps_in(rows, Window(T0, None)) == [(T0, Decimal("100")), (t, Decimal("80"))]


def test_rows_outside_the_window_do_not_count():
    w = Window(T0 + timedelta(hours=2), T0 + timedelta(hours=4))
    rows = [
        (T0, T0 + timedelta(hours=2), Decimal("50")),  # ends as the window starts
        (T0 + timedelta(hours=4), None, Decimal("70")),  # starts as the window ends
        (T0 + timedelta(hours=3), T0 + timedelta(hours=5), Decimal("9")),
    ]
    assert peak_sold(rows, w) == Decimal("9")


@pytest.mark.django_db
def test_the_sql_window_query_equals_the_sweep_on_stored_rows(fleet):
    """Random stored entitlements on a grid of hours (touching boundaries often), many windows."""
    rng = random.Random(19)
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    rows = []
    for i in range(60):
        s = now + timedelta(hours=rng.randint(0, 12))
        e = None if i % 4 == 0 else s + timedelta(hours=rng.randint(1, 6))
        rows.append(
            Entitlement(
                tenant=fleet.acme,
                model=fleet.pool_a.model,
                region=fleet.pool_a.region,
                pool=fleet.pool_a,
                traffic_class_id="reserved",
                starts_at=s,
                ends_at=e,
                cu=Decimal(rng.randint(1, 999)) / 1000,
                **ENVELOPE.__dict__,
            )  # fmt: skip
        )
    Entitlement.objects.bulk_create(rows)
    stored = [(r.starts_at, r.ends_at, r.cu) for r in rows]
    for a in range(0, 13):
        for length in (None, 1, 3, 8):
            w = Window(now + timedelta(hours=a), None if length is None else now + timedelta(hours=a + length))
            assert pool_sold_peak(fleet.pool_a, w) == peak_sold(stored, w) == brute_peak(stored, w), w
    assert pool_sold_peak(fleet.pool_b, Window(now, None)) == 0
