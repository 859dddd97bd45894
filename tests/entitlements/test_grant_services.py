from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from entitlements.models import Entitlement, EntitlementHistory, FailoverReserve
from entitlements.services import (
    OversellError,
    entitlement_amend,
    entitlement_grant,
    entitlement_revoke,
    reserve_set,
)
from tests.factories import grant_kwargs


def test_pool_physical_and_deliverable_exact(fleet):
    # 4 replicas × 10,000 tok/s × (4 + 300/100) / 1000 = 280 CU
    assert fleet.pool_a.physical_cu == Decimal("280.000")
    assert fleet.pool_a.deliverable_cu == Decimal("280.000")


def test_grant_up_to_deliverable_then_refuses_naming_pool_and_headroom(fleet):
    entitlement_grant(actor=fleet.operator, reason="launch", **grant_kwargs(fleet.pool_a, fleet.acme, "200"))
    with pytest.raises(OversellError) as exc:
        entitlement_grant(actor=fleet.operator, reason="launch", **grant_kwargs(fleet.pool_a, fleet.globex, "80.001"))
    assert "pool pool-a has 80.000 CU of headroom left" in str(exc.value)
    entitlement_grant(actor=fleet.operator, reason="fits exactly", **grant_kwargs(fleet.pool_a, fleet.globex, "80"))
    assert Entitlement.objects.filter(pool=fleet.pool_a).count() == 2


def test_headroom_is_checked_over_the_whole_window(fleet):
    now = timezone.now()
    # 200 CU from day 10 to day 20 only.
    entitlement_grant(
        actor=fleet.operator,
        reason="later launch",
        **grant_kwargs(fleet.pool_a, fleet.acme, "200", start=now + timedelta(days=10), days=10),
    )
    # 100 CU over days 0–5 fits (no overlap), over days 0–15 does not.
    entitlement_grant(
        actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", start=now, days=5)
    )
    with pytest.raises(OversellError):
        entitlement_grant(
            actor=fleet.operator,
            reason="x",
            **grant_kwargs(fleet.pool_a, fleet.globex, "100", start=now + timedelta(days=6), days=9),
        )


def test_best_effort_counts_zero(fleet):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "280"))
    e = entitlement_grant(
        actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "50", traffic_class="best_effort")
    )
    assert e.cu == Decimal("50.000")


def test_reserve_reduces_deliverable_once_and_cannot_strand_sold(fleet):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "200"))
    reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu="80")
    fleet.pool_a.refresh_from_db()
    assert fleet.pool_a.reserve_held_cu == Decimal("80.000")
    assert fleet.pool_a.deliverable_cu == Decimal("200.000")
    with pytest.raises(OversellError):
        reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu="81")
    with pytest.raises(OversellError):
        entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "1"))


def test_database_refuses_a_reserve_listed_twice_for_one_scope_or_for_itself(fleet):
    zone = fleet.pool_b.zones.first().zone
    FailoverReserve.objects.create(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, protected_zone=zone, cu=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        FailoverReserve.objects.create(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, protected_zone=zone, cu=1)
    FailoverReserve.objects.create(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        FailoverReserve.objects.create(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        FailoverReserve.objects.create(host_pool=fleet.pool_a, protected_pool=fleet.pool_a, cu=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        FailoverReserve.objects.create(host_pool=fleet.pool_a, cu=1)


def test_database_refuses_reserves_beyond_physical(fleet):
    from entitlements.models import Pool

    with pytest.raises(IntegrityError), transaction.atomic():
        Pool.objects.filter(pk=fleet.pool_a.pk).update(reserve_held_cu=Decimal("280.001"))
    with pytest.raises(ValidationError) as exc:
        reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu="281")
    assert "only 280.000 CU physical" in str(exc.value)


def test_history_records_who_when_why_including_bulk_updates(fleet):
    e = entitlement_grant(actor=fleet.operator, reason="initial grant", **grant_kwargs(fleet.pool_a, fleet.acme, "10"))
    entitlement_amend(actor=fleet.operator, reason="growth", entitlement=e, cu="20")
    Entitlement.objects.filter(pk=e.pk).update(max_concurrency=99)  # bulk write outside services
    entitlement_revoke(actor=fleet.operator, reason="offboarded", entitlement=e)
    rows = list(EntitlementHistory.objects.filter(entitlement_id=e.pk).order_by("pk"))
    assert [(r.op, r.version, r.reason, r.actor_id) for r in rows] == [
        ("insert", 1, "initial grant", fleet.operator.pk),
        ("update", 2, "growth", fleet.operator.pk),
        ("update", 3, "direct SQL", None),  # the trigger bumps the version the bulk write did not
        ("update", 4, "offboarded", fleet.operator.pk),
    ]
    assert Decimal(str(rows[1].snapshot["cu"])) == Decimal("20")
    assert rows[2].snapshot["max_concurrency"] == 99


def test_amend_checks_headroom_excluding_itself(fleet):
    e = entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "200"))
    entitlement_amend(actor=fleet.operator, reason="grow", entitlement=e, cu="280")
    with pytest.raises(OversellError):
        entitlement_amend(actor=fleet.operator, reason="grow", entitlement=e, cu="280.001")
    e.refresh_from_db()
    assert e.cu == Decimal("280.000") and e.version == 2


def test_bad_input_names_the_field(fleet):
    with pytest.raises(ValidationError) as exc:
        entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "0"))
    assert list(exc.value.message_dict) == ["cu"]
    kw = grant_kwargs(fleet.pool_a, fleet.acme, "1")
    kw["ends_at"] = kw["starts_at"]
    with pytest.raises(ValidationError) as exc:
        entitlement_grant(actor=fleet.operator, reason="x", **kw)
    assert list(exc.value.message_dict) == ["ends_at"]
