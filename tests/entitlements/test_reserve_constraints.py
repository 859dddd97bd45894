"""Failover reserves in the database (issue 12.8): triggers keep a reserve to its host's model and
a zone reserve's zone to its pool's region, whatever writes the row (raw SQL included)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from entitlements.models import FailoverReserve, Pool, Region, Zone
from entitlements.services import reserve_set
from tests.factories import OperatingPointFactory, ServedModelFactory, make_pool


@pytest.fixture
def other(fleet):
    return make_pool("pool-other", op=OperatingPointFactory(model=ServedModelFactory(slug="other-model")))


def _insert(host, protected, zone=None):
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            "INSERT INTO entitlements_failoverreserve (host_pool_id, protected_pool_id, protected_zone_id, cu, note) "
            "VALUES (%s, %s, %s, 1, 'raw')",
            [host.pk, protected.pk, zone.pk if zone else None],
        )


def test_raw_sql_reserve_for_another_models_pool_is_refused(fleet, other):
    with pytest.raises(IntegrityError, match="serves another model"):
        _insert(other, fleet.pool_a)
    _insert(fleet.pool_b, fleet.pool_a)  # same model: the control goes in
    assert FailoverReserve.objects.count() == 1


def test_moving_a_reserve_to_another_models_host_is_refused(fleet, other):
    res = reserve_set(host_pool=fleet.pool_b, protected_pool=fleet.pool_a, cu="10")
    with pytest.raises(IntegrityError, match="serves another model"), transaction.atomic():
        FailoverReserve.objects.filter(pk=res.pk).update(host_pool=other)


def test_a_linked_pool_cannot_change_model(fleet, other):
    reserve_set(host_pool=fleet.pool_b, protected_pool=fleet.pool_a, cu="10")
    with pytest.raises(IntegrityError, match="model cannot change"), transaction.atomic():
        Pool.objects.filter(pk=fleet.pool_a.pk).update(model=other.model)
    Pool.objects.filter(pk=other.pk).update(model=fleet.pool_a.model)  # unlinked: allowed


def test_raw_sql_zone_reserve_outside_the_pools_region_is_refused(fleet):
    far = Zone.objects.create(slug="eu-test-a", region=Region.objects.create(slug="eu-test", name="EU test"))
    with pytest.raises(IntegrityError, match="not in the region"):
        _insert(fleet.pool_b, fleet.pool_a, far)
    _insert(fleet.pool_b, fleet.pool_a, fleet.pool_a.zones.first().zone)
    assert FailoverReserve.objects.count() == 1
