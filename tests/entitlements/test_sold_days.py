"""entitlements.sold_days: the largest of a window's daily peaks is the approval's peak over that window
(entitlements.selectors.pools_sold_peaks), for random commitments and windows of whole days, on SQLite and
(marked postgres) on PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from entitlements.models import Entitlement
from entitlements.selectors import Window, pools_sold_peaks
from entitlements.sold_days import daily_sold_peaks
from tests import factories as f

DAY0 = datetime(2031, 3, 1, tzinfo=UTC)


def _random_commitments(fleet, seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for i in range(120):
        pool = rng.choice([fleet.pool_a, fleet.pool_b])
        # Starts and ends on and off midnight, some before day 0, some open-ended, some revoked.
        start = DAY0 + timedelta(days=rng.randint(-5, 40), hours=rng.choice([0, 0, 7, 23]))
        end = None if rng.random() < 0.15 else start + timedelta(days=rng.randint(0, 20), hours=rng.choice([0, 5]))
        if end is not None and end <= start:
            end = start + timedelta(hours=1)
        ent = Entitlement(
            tenant=fleet.acme,
            model=pool.model,
            region=pool.region,
            pool=pool,
            traffic_class_id=rng.choice(["reserved", "reserved", "best_effort"]),
            cu=Decimal(rng.randint(1, 9000)) / 1000,
            starts_at=start,
            ends_at=end,
            revoked_at=DAY0 if rng.random() < 0.1 else None,
            **f.ENVELOPE.__dict__,
        )
        rows.append(ent)
    Entitlement.objects.bulk_create(rows)


def _check(fleet) -> None:
    ids = [fleet.pool_a.pk, fleet.pool_b.pk]
    bounded = daily_sold_peaks(ids, DAY0, 70)
    open_ended = daily_sold_peaks(ids, DAY0, None)
    for d in range(0, 60, 3):
        for length in (1, 2, 7, 10):
            start = DAY0 + timedelta(days=d)
            peaks = pools_sold_peaks(ids, Window(start, start + timedelta(days=length)))
            for pk in ids:
                assert max(bounded[pk][d : d + length]) == peaks[pk], (pk, d, length)
        peaks = pools_sold_peaks(ids, Window(DAY0 + timedelta(days=d), None))
        for pk in ids:
            assert max(open_ended[pk][min(d, len(open_ended[pk]) - 1) :]) == peaks[pk], (pk, d)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2])
def test_daily_peaks_agree_with_the_approval_peak(fleet, seed):
    _random_commitments(fleet, seed)
    _check(fleet)


@pytest.mark.postgres
@pytest.mark.django_db
def test_daily_peaks_agree_with_the_approval_peak_on_postgres(fleet):
    _random_commitments(fleet, 3)
    _check(fleet)
