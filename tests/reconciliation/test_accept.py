"""An accepted finding changes the next committed series by its CU; acts are recorded with who and why."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from entitlements.selectors import Window, peak_sold
from entitlements.services import entitlement_amend
from forecasting.gap import committed_rows
from reconciliation.models import Finding, FindingAct
from reconciliation.services import FindingError, finding_accept, finding_dismiss
from tests.reconciliation.conftest import window


def _finding(ent, kind="right_size_down", delta="-1.4"):
    start, end = window()
    return Finding.objects.create(
        entitlement=ent, tenant=ent.tenant, pool=ent.pool, kind=kind, window_start=start, window_end=end,
        action="Amend", cu_delta=Decimal(delta), recommended={"cu": 0.6},
    )  # fmt: skip


def _committed_next_week(pool):
    t0 = timezone.now() + timedelta(hours=1)
    return peak_sold(committed_rows([pool.pk]).get(pool.pk, []), Window(t0, t0 + timedelta(weeks=1)))


@pytest.mark.django_db
def test_accepting_a_right_size_lowers_the_committed_series_by_its_cu(grant, fleet):
    ent = grant("2")
    grant("5", tenant=fleet.globex)  # another tenant's entitlement in the same pool stays as it is
    before = _committed_next_week(ent.pool)
    f = finding_accept(actor=fleet.operator, finding=_finding(ent), reason="agreed with the tenant")
    assert f.state == "accepted" and f.acted_by == fleet.operator
    assert _committed_next_week(ent.pool) - before == Decimal("-1.4")
    act = FindingAct.objects.get(finding=f, act="accepted")
    assert act.actor == fleet.operator and act.reason == "agreed with the tenant"
    # once the entitlement is amended, the amendment carries the change: the adjustment lapses
    entitlement_amend(actor=fleet.operator, reason="right-size", entitlement=ent, cu=Decimal("0.6"))
    assert _committed_next_week(ent.pool) - before == Decimal("-1.4")


@pytest.mark.django_db
def test_dismissing_changes_nothing_and_needs_a_reason(grant, fleet):
    ent = grant("2")
    before = _committed_next_week(ent.pool)
    f = _finding(ent)
    with pytest.raises(FindingError) as e:
        finding_dismiss(actor=fleet.operator, finding=f, reason=" ")
    assert e.value.field == "reason"
    finding_dismiss(actor=fleet.operator, finding=f, reason="seasonal: they grow in March")
    assert _committed_next_week(ent.pool) == before
    with pytest.raises(FindingError) as e:
        finding_accept(actor=fleet.operator, finding=f, reason="changed my mind")
    assert e.value.field == "state"


@pytest.mark.django_db
def test_tenant_members_may_not_act(grant, fleet, django_user_model):
    from entitlements.models import Membership

    ent = grant("2")
    viewer = django_user_model.objects.create_user("v17", password="x")
    Membership.objects.create(user=viewer, tenant=fleet.acme, role="viewer")
    with pytest.raises(PermissionError):
        finding_accept(actor=viewer, finding=_finding(ent), reason="please")
