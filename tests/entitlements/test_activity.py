"""One rule for "CU active at t": the query (selectors.active_at) and the row test (the API's `active`,
the live series' entitled rate) agree at every boundary: a start counts, an end and a revocation do not."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from entitlements.activity import is_active
from entitlements.models import Entitlement
from entitlements.selectors import active_at
from entitlements.services import entitlement_grant, entitlement_revoke
from tests.factories import grant_kwargs

pytestmark = pytest.mark.django_db


def test_the_query_and_the_row_test_agree_at_every_boundary(fleet):
    t0 = timezone.now().replace(microsecond=0) - timedelta(days=1)
    grant = lambda start, days: entitlement_grant(actor=fleet.operator, reason="x",  # noqa: E731
                                                  **grant_kwargs(fleet.pool_a, fleet.acme, "10", start=start, days=days))  # fmt: skip
    ended = grant(t0, 1)  # [t0, t0 + 1 day)
    later = grant(t0 + timedelta(hours=6), None)
    revoked = grant(t0, None)
    entitlement_revoke(actor=fleet.operator, reason="x", entitlement=revoked, at=t0 + timedelta(hours=12))
    instants = [
        t0 - timedelta(seconds=1),
        t0,
        t0 + timedelta(hours=6),
        t0 + timedelta(hours=12),
        t0 + timedelta(days=1),
    ]
    expected = {
        instants[0]: set(),
        instants[1]: {ended.pk, revoked.pk},
        instants[2]: {ended.pk, later.pk, revoked.pk},
        instants[3]: {ended.pk, later.pk},  # revoked at that instant: no longer counted
        instants[4]: {later.pk},  # ended at that instant
    }
    rows = list(Entitlement.objects.all())
    for t, ids in expected.items():
        assert set(active_at(Entitlement.objects.all(), t).values_list("pk", flat=True)) == ids, t
        assert {e.pk for e in rows if is_active(e.starts_at, e.ends_at, e.revoked_at, t)} == ids, t
