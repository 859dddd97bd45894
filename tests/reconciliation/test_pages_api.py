"""Pages and API (docs/contract.md §7 roles): staff see every finding and act; tenant members read their own;
another tenant's finding is a 404 on page and API; the amendment page is prefilled from the evidence."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from entitlements.models import Membership
from forecasting.models import CommittedAdjustment
from reconciliation.models import Finding
from tests.reconciliation.conftest import window


@pytest.fixture
def people(fleet, django_user_model):

    def member(name, tenant, role="viewer"):
        u = django_user_model.objects.create_user(name, password="x")
        Membership.objects.create(user=u, tenant=tenant, role=role)
        return u

    return {
        "operator": fleet.operator,
        "acme": member("acme-v", fleet.acme),
        "globex": member("globex-v", fleet.globex),
    }


def _client(user):
    c = Client()
    c.force_login(user)
    return c


def _finding(ent, kind="right_size_down"):
    start, end = window()
    return Finding.objects.create(
        entitlement=ent, tenant=ent.tenant, pool=ent.pool, kind=kind, window_start=start, window_end=end,
        action="Amend to 0.6 CU", cu_delta=Decimal("-1.4"), recommended={"cu": 0.6}, evidence={"p95_hourly_use_share": 0.2},
    )  # fmt: skip


@pytest.mark.django_db
def test_tenants_see_their_own_and_404_for_others(grant, people):
    f = _finding(grant("2"))
    acme, globex = _client(people["acme"]), _client(people["globex"])
    assert acme.get(f"/reconciliation/{f.pk}/").status_code == 200
    assert acme.get(f"/api/v1/reconciliation/{f.pk}").json()["cu_delta"] == "-1.400"
    assert [x["id"] for x in acme.get("/api/v1/reconciliation").json()] == [str(f.pk)]
    assert globex.get(f"/reconciliation/{f.pk}/").status_code == 404
    assert globex.get(f"/api/v1/reconciliation/{f.pk}").status_code == 404
    assert globex.get("/api/v1/reconciliation").json() == []
    assert str(f.pk) not in globex.get("/reconciliation/").content.decode()
    # members read, they do not act
    assert acme.post(f"/api/v1/reconciliation/{f.pk}/accept", {"reason": "x"}).status_code == 403
    assert globex.post(f"/api/v1/reconciliation/{f.pk}/accept", {"reason": "x"}).status_code == 403


@pytest.mark.django_db
def test_operator_accepts_through_the_api_with_a_reason(grant, people):
    f = _finding(grant("2"))
    op = _client(people["operator"])
    r = op.post(f"/api/v1/reconciliation/{f.pk}/accept", {}, content_type="application/json")
    assert r.status_code == 400 and "reason" in r.json()
    r = op.post(f"/api/v1/reconciliation/{f.pk}/accept", {"reason": "agreed"}, content_type="application/json")
    assert r.status_code == 200 and r.json()["state"] == "accepted"
    assert CommittedAdjustment.objects.get().cu_delta == Decimal("-1.400")
    r = op.post(f"/api/v1/reconciliation/{f.pk}/dismiss", {"reason": "late"}, content_type="application/json")
    assert r.status_code == 409


@pytest.mark.django_db
def test_the_amendment_is_prefilled_and_amends_then_accepts(grant, people):
    ent = grant("2")
    f = _finding(ent)
    op = _client(people["operator"])
    page = op.get(f"/reconciliation/{f.pk}/amend/").content.decode()
    assert 'name="cu" value="0.6"' in page and "Reconciliation: right-size down" in page
    assert _client(people["acme"]).get(f"/reconciliation/{f.pk}/amend/").status_code == 404
    r = op.post(f"/reconciliation/{f.pk}/amend/", {"cu": "0.6", "reason": "right-size, agreed"})
    assert r.status_code == 302
    ent.refresh_from_db()
    f.refresh_from_db()
    assert ent.cu == Decimal("0.600") and f.state == "accepted"
    assert not CommittedAdjustment.objects.exists()  # the amendment itself carries the change
    bad = op.post(f"/reconciliation/{_finding(ent).pk}/amend/", {"cu": "-1", "reason": "x"})
    assert bad.status_code == 400 and "cu:" in bad.content.decode()


@pytest.mark.django_db
def test_a_requester_files_a_launch_request_prefilled_from_a_grow_finding(grant, people, fleet, django_user_model):
    from portal.models import LaunchRequest

    ent = grant("1", traffic_class="best_effort", overage="borrow", borrowing_limit_cu=Decimal("2"))
    start, end = window()
    f = Finding.objects.create(
        entitlement=ent, tenant=ent.tenant, pool=ent.pool, kind="grow", window_start=start, window_end=end,
        action="File a launch request for 1.5 CU reserved", cu_delta=Decimal("1.5"),
        recommended={"cu": 1.5, "traffic_class": "reserved", "launch_request": True},
    )  # fmt: skip
    requester = django_user_model.objects.create_user("acme-r", password="x")
    Membership.objects.create(user=requester, tenant=fleet.acme, role="requester")
    page = _client(requester).get(f"/reconciliation/{f.pk}/").content.decode()
    assert 'id="new-launch-request"' in page
    r = _client(requester).post("/launch/new", {"from_finding": str(f.pk)})
    assert r.status_code == 302
    req = LaunchRequest.objects.get()
    assert (req.model, req.traffic_class, req.tenant) == (ent.model, "reserved", fleet.acme)
    assert [row.region for row in req.region_rows.all()] == [ent.region]
    assert (req.committed_basis, req.committed_value) == ("wt_per_min", 1.5 * 1000 * 60)
    assert req.max_prompt_tokens == ent.max_prompt_tokens and str(f.pk) in req.justification
    outsider = django_user_model.objects.create_user("globex-r", password="x")
    Membership.objects.create(user=outsider, tenant=fleet.globex, role="requester")
    assert _client(outsider).post("/launch/new", {"from_finding": str(f.pk)}).status_code == 404
    assert LaunchRequest.objects.count() == 1
