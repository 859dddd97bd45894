"""entitlements.sold_profile: the change-point read gives, for every window, exactly the figure a plain
day-by-day reference gives (sold(t) summed row by row at every instant that can matter) and the approval's
own peak (entitlements.selectors.pools_sold_peaks), on randomised grants with edges on window boundaries,
a microsecond long, open-ended, overlapping, revoked and not-counted rows; on SQLite and (marked postgres) on
PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest

from entitlements.models import Entitlement
from entitlements.selectors import Window, pools_sold_peaks
from entitlements.sold_profile import sold_steps, us
from tests import factories as f

DAY0 = datetime(2031, 3, 1, tzinfo=UTC)
DAY = timedelta(days=1)
SPAN = 60  # days read from DAY0


def _random_grants(fleet, seed: int) -> list[Entitlement]:
    rng = random.Random(seed)
    rows = []
    for _ in range(150):
        pool = rng.choice([fleet.pool_a, fleet.pool_b])
        # Edges on midnight (a window's boundary) and off it, to the microsecond, before DAY0 and past the span.
        start = DAY0 + timedelta(days=rng.randint(-5, SPAN + 3), hours=rng.choice([0, 0, 0, 7, 23]))
        if rng.random() < 0.2:
            start += timedelta(microseconds=rng.choice([1, 999_999]))
        kind = rng.random()
        if kind < 0.15:
            end = None  # open-ended
        elif kind < 0.25:
            end = start + timedelta(microseconds=1)  # as short as can be (ends_at > starts_at, a constraint)
        else:
            end = start + timedelta(days=rng.randint(0, 20), hours=rng.choice([0, 0, 5]))
            if end == start:
                end += timedelta(microseconds=1)
        rows.append(
            Entitlement(
                tenant=fleet.acme,
                model=pool.model,
                region=pool.region,
                pool=pool,
                traffic_class_id=rng.choice(["reserved", "reserved", "reserved", "best_effort"]),
                cu=Decimal(rng.randint(1, 9000)) / 1000,
                starts_at=start,
                ends_at=end,
                revoked_at=DAY0 if rng.random() < 0.1 else None,
                **f.ENVELOPE.__dict__,
            )
        )
    return Entitlement.objects.bulk_create(rows)


def _reference(rows: list[Entitlement], pool_id: int, a: datetime, b: datetime | None) -> Decimal:
    """The most sold over [a, b), the plain way: sold(t) summed row by row at a and at every edge inside,
    the only instants where sold(t) can reach a new value."""
    live = [r for r in rows if r.pool_id == pool_id and r.revoked_at is None and r.traffic_class_id == "reserved"]
    instants = {a} | {t for r in live for t in (r.starts_at, r.ends_at) if t is not None and t > a}
    instants = {t for t in instants if b is None or t < b}
    return max(
        sum((r.cu for r in live if r.starts_at <= t and (r.ends_at is None or t < r.ends_at)), Decimal(0))
        for t in instants
    )


def _reference_days(rows, pool_id: int, first: int, n: int) -> list[Decimal]:
    """Each day's own peak, day by day (a window of whole days peaks at the largest of them)."""
    return [_reference(rows, pool_id, DAY0 + (first + d) * DAY, DAY0 + (first + d + 1) * DAY) for d in range(n)]


def _check(fleet, seed: int) -> None:
    rows = _random_grants(fleet, seed)
    ids = [fleet.pool_a.pk, fleet.pool_b.pk]
    bounded = sold_steps(ids, Window(DAY0, DAY0 + SPAN * DAY))
    open_ended = sold_steps(ids, Window(DAY0, None))
    starts = np.array([us(DAY0 + d * DAY) for d in range(SPAN - 10)])
    for pk in ids:
        days = _reference_days(rows, pk, 0, SPAN + 3)
        for length in (1, 2, 7, 10):
            got = bounded[pk].peaks_milli(starts, length * 86_400_000_000)
            want = [int(max(days[d : d + length]) * 1000) for d in range(SPAN - 10)]
            assert got.tolist() == want, (pk, length)
        # From a day on, through every later change (the open-ended read; a bounded one stops at its end).
        got = open_ended[pk].peaks_milli(starts, None)
        want = [int(_reference(rows, pk, DAY0 + d * DAY, None) * 1000) for d in range(SPAN - 10)]
        assert got.tolist() == want, pk
    # Windows off midnight, to the microsecond, and the approval's own figure for each.
    rng = random.Random(seed)
    for _ in range(40):
        a = DAY0 + timedelta(seconds=rng.randint(0, 40 * 86_400), microseconds=rng.choice([0, 1, 500_000]))
        b = None if rng.random() < 0.2 else a + timedelta(seconds=rng.randint(1, 15 * 86_400))
        approval = pools_sold_peaks(ids, Window(a, b))
        for pk in ids:
            want = _reference(rows, pk, a, b)
            assert open_ended[pk].peak(a, b) == want == approval[pk], (pk, a, b)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_change_points_agree_with_day_by_day_and_the_approval_peak(fleet, seed):
    _check(fleet, seed)


@pytest.mark.postgres
@pytest.mark.django_db
def test_change_points_agree_on_postgres(fleet):
    _check(fleet, 4)


@pytest.mark.django_db
def test_no_grants_is_zero_everywhere(fleet):
    steps = sold_steps([fleet.pool_a.pk], Window(DAY0, DAY0 + 5 * DAY))[fleet.pool_a.pk]
    assert steps.peak(DAY0, DAY0 + DAY) == 0
    assert steps.peak(DAY0 + 3 * DAY, None) == 0
    with pytest.raises(ValueError):  # before the span nothing was read: no figure, rather than a wrong one
        steps.peak(DAY0 - DAY, DAY0 + DAY)
