"""docs/contract.md §5: one admission scope lives in one pool, and only best_effort borrows.

Fleet: pool-a and pool-b both serve llama-test in us-test, 280 CU deliverable each.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from admission import params
from entitlements.api.snapshot import build_snapshot
from entitlements.models import Entitlement, EntitlementHistory
from entitlements.services import (
    ScopePoolConflict,
    entitlement_amend,
    entitlement_grant,
    scope_move,
)
from tests.factories import ENVELOPE, grant_kwargs


def _grant(fleet, pool, cu, tenant=None, **kw):
    args = grant_kwargs(pool, tenant or fleet.acme, cu, traffic_class=kw.pop("traffic_class", "reserved"))
    return entitlement_grant(actor=fleet.operator, reason="t", **{**args, **kw})


# Only best_effort borrows ---------------------------------------------------------------------


@pytest.mark.parametrize("cls", ["reserved", "shared"])
def test_a_borrowing_limit_on_a_guaranteed_class_is_refused_naming_the_field(fleet, cls):
    with pytest.raises(ValidationError) as exc:
        _grant(fleet, fleet.pool_a, "10", traffic_class=cls, overage="borrow", borrowing_limit_cu="2")
    assert list(exc.value.message_dict) == ["borrowing_limit_cu"]
    with pytest.raises(ValidationError) as exc:
        _grant(fleet, fleet.pool_a, "10", traffic_class=cls, overage="borrow")
    assert list(exc.value.message_dict) == ["overage"]
    assert Entitlement.objects.count() == 0


def test_amending_borrowing_onto_reserved_is_refused(fleet):
    e = _grant(fleet, fleet.pool_a, "10")
    with pytest.raises(ValidationError) as exc:
        entitlement_amend(actor=fleet.operator, reason="t", entitlement=e, borrowing_limit_cu="1")
    assert list(exc.value.message_dict) == ["borrowing_limit_cu"]
    e.refresh_from_db()
    assert (e.borrowing_limit_cu, e.version) == (Decimal("0.000"), 1)


def test_best_effort_borrows(fleet):
    e = _grant(fleet, fleet.pool_a, "1", traffic_class="best_effort", overage="borrow", borrowing_limit_cu="5")
    assert (e.overage, e.borrowing_limit_cu) == ("borrow", Decimal("5.000"))


@pytest.mark.parametrize(
    "change", [{"borrowing_limit_cu": Decimal(3)}, {"overage": "borrow"}], ids=["limit", "overage"]
)
def test_the_database_refuses_borrowing_on_reserved_written_around_the_services(fleet, change):
    e = _grant(fleet, fleet.pool_a, "10")
    with pytest.raises(IntegrityError, match="ent_only_best_effort_borrows"), transaction.atomic():
        Entitlement.objects.filter(pk=e.pk).update(**change)


def test_snapshot_and_enforcement_agree_on_who_borrows(fleet):
    _grant(fleet, fleet.pool_a, "10")
    _grant(fleet, fleet.pool_a, "1", traffic_class="best_effort", overage="borrow", borrowing_limit_cu="4")
    legacy = _grant(
        fleet,
        fleet.pool_a,
        "1",
        tenant=fleet.globex,
        traffic_class="best_effort",
        overage="borrow",
        borrowing_limit_cu="2",
    )
    # A row written before the services refused a borrowing limit beside overage throttle.
    Entitlement.objects.filter(pk=legacy.pk).update(overage="throttle")
    exported = {
        (e["tenant"], e["traffic_class"]): (e["borrowing_limit_wt_per_s"], e["pool"])
        for e in build_snapshot()["entitlements"]
    }
    enforced = {
        (k[0], k[4]): (s.borrow_rate, params.build().pools[s.pool_id].slug) for k, s in params.build().scopes.items()
    }
    # globex's best_effort has a limit but overage throttle: neither exports nor enforces a rate.
    assert (
        exported
        == enforced
        == {
            ("acme", "reserved"): (0.0, "pool-a"),
            ("acme", "best_effort"): (4000.0, "pool-a"),
            ("globex", "best_effort"): (0.0, "pool-a"),
        }
    )


# One scope, one pool ---------------------------------------------------------------------------


def test_a_scope_grows_in_its_pool_and_a_grant_that_does_not_fit_is_refused_naming_it(fleet):
    _grant(fleet, fleet.pool_a, "200")
    # Without a pool named, the first pool with room would be pool-b: the scope's pool wins.
    args = {**grant_kwargs(fleet.pool_a, fleet.acme, "50"), "pool": None}
    second = entitlement_grant(actor=fleet.operator, reason="t", **args)
    assert second.pool == fleet.pool_a
    with pytest.raises(ScopePoolConflict) as exc:
        entitlement_grant(actor=fleet.operator, reason="t", **{**args, "cu": "31"})
    assert list(exc.value.message_dict) == ["cu"]
    assert exc.value.messages[0].startswith("pool pool-a has 30.000 CU of headroom left in that window")
    with pytest.raises(ScopePoolConflict, match="lives in pool pool-a, not pool-b"):
        _grant(fleet, fleet.pool_b, "1")
    assert Entitlement.objects.filter(pool=fleet.pool_b).count() == 0


def test_other_scopes_and_revoked_rows_do_not_pin_a_pool(fleet):
    _grant(fleet, fleet.pool_a, "10", tenant=fleet.globex)  # another tenant
    _grant(fleet, fleet.pool_a, "10", traffic_class="shared")  # another class
    assert _grant(fleet, fleet.pool_b, "10").pool == fleet.pool_b


def test_scope_move_takes_every_live_entitlement_with_history(fleet):
    first = _grant(fleet, fleet.pool_a, "100")
    second = _grant(fleet, fleet.pool_a, "50")
    other = _grant(fleet, fleet.pool_a, "20", tenant=fleet.globex)
    moved = scope_move(
        actor=fleet.operator, reason="drain pool-a", tenant=fleet.acme, project=None, traffic_class="reserved",
        to_pool=fleet.pool_b,
    )  # fmt: skip
    assert [e.pk for e in moved] == [first.pk, second.pk]
    assert set(Entitlement.objects.filter(pool=fleet.pool_b).values_list("pk", flat=True)) == {first.pk, second.pk}
    other.refresh_from_db()
    assert other.pool == fleet.pool_a
    last = EntitlementHistory.objects.filter(entitlement_id=first.pk).order_by("pk").last()
    assert (last.reason, last.snapshot["pool_id"]) == ("drain pool-a", fleet.pool_b.pk)
    assert _grant(fleet, fleet.pool_b, "5").pool == fleet.pool_b  # the scope now grows there


def test_scope_move_that_does_not_fit_is_refused_and_moves_nothing(fleet):
    _grant(fleet, fleet.pool_a, "100")
    _grant(fleet, fleet.pool_b, "181", tenant=fleet.globex)
    with pytest.raises(ScopePoolConflict, match="pool pool-b delivers 280.000 CU"):
        scope_move(
            actor=fleet.operator, reason="t", tenant=fleet.acme, project=None, traffic_class="reserved",
            to_pool=fleet.pool_b,
        )  # fmt: skip
    assert Entitlement.objects.filter(tenant=fleet.acme, pool=fleet.pool_a).count() == 1


def test_an_envelope_longer_than_the_models_context_is_a_400_naming_the_field(fleet):
    kwargs = grant_kwargs(fleet.pool_a, fleet.acme, "10")
    ctx = fleet.pool_a.model.context_length
    kwargs["envelope"] = type(ENVELOPE)(**{**ENVELOPE.__dict__, "max_output_tokens": ctx - 8000 + 1})
    with pytest.raises(ValidationError) as err:
        entitlement_grant(actor=fleet.operator, reason="too long", **kwargs)
    assert "max_output_tokens" in err.value.message_dict
    assert "context of 16384 tokens" in err.value.message_dict["max_output_tokens"][0]
    kwargs["envelope"] = type(ENVELOPE)(**{**ENVELOPE.__dict__, "max_output_tokens": ctx - 8000})
    assert entitlement_grant(actor=fleet.operator, reason="fits exactly", **kwargs).max_output_tokens == ctx - 8000
