"""The approver's start date and pool when approving (issue 22). Fleet: pool-a and pool-b serve
llama-test in us-test, 280 CU each; the submitted request asks 25.175 CU committed, reserved."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from portal.models import LaunchRequest
from portal.selectors import day_start
from portal.services import intake
from tests.clients import web_client as _web
from tests.factories import grant_kwargs
from tests.figures import figures


def _acme_grant(fleet):
    return Entitlement.objects.get(tenant=fleet.acme)


def test_default_pool_is_the_one_with_most_headroom_after_the_grant(fleet, people, submitted):
    # pool-a is first by pk but has less room: the default goes past it to pool-b.
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    page = _web(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert '<option value="pool-b" selected>' in page and 'name="start_date"' in page
    intake.launch_request_approve(actor=people.approver, request=submitted)
    ent = _acme_grant(fleet)
    assert ent.pool == fleet.pool_b
    assert ent.starts_at == day_start(submitted.launch_date)


def test_explicit_pool_and_start_date(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    start = submitted.launch_date + timedelta(days=3)
    resp = _web(people.approver).post(
        f"/launch/{submitted.uuid}/partially-approve",
        {"cu_us-test": "10", "comment": "what fits", "start_date": start.isoformat(), "pool_us-test": "pool-a"},
    )
    assert resp.status_code == 302
    ent = _acme_grant(fleet)
    assert (ent.pool, ent.cu, ent.starts_at) == (fleet.pool_a, 10, day_start(start))


def test_a_scope_living_in_a_pool_must_go_there(fleet, people, submitted):
    # acme's reserved scope in us-test already lives in pool-a: choosing pool-b is refused by field.
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.acme, "5", days=60))
    page = _web(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert "already lives in pool-a" in page
    resp = _web(people.approver).post(f"/launch/{submitted.uuid}/approve", {"pool_us-test": "pool-b"})
    assert resp.status_code == 400
    assert "pool us-test: acme&#x27;s reserved scope in us-test already lives in pool pool-a" in resp.content.decode()
    assert Entitlement.objects.filter(tenant=fleet.acme).count() == 1
    assert LaunchRequest.objects.get(pk=submitted.pk).state == "submitted"


def test_an_explicit_pool_without_room_is_refused_even_if_another_has_room(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "270", days=60))
    with pytest.raises(intake.HeadroomGone, match="pool pool-a has 10.000 CU"):
        intake.launch_request_approve(actor=people.approver, request=submitted, pools={"us-test": "pool-a"})
    assert not Entitlement.objects.filter(tenant=fleet.acme).exists()


@pytest.mark.parametrize(
    ("start", "pool", "field"),
    [(-1, "", "start_date"), (30, "", "start_date"), (0, "pool-zz", "pool_us-test")],
)
def test_bad_start_or_pool_names_the_field(fleet, people, submitted, start, pool, field):
    with pytest.raises(ValidationError) as exc:
        intake.launch_request_approve(
            actor=people.approver,
            request=submitted,
            start_date=(submitted.launch_date + timedelta(days=start)).isoformat(),
            pools={"us-test": pool},
        )
    assert field in exc.value.message_dict
    assert not Entitlement.objects.filter(tenant=fleet.acme).exists()


def test_after_a_partial_approval_the_pool_chart_draws_the_grant(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    intake.launch_request_partially_approve(
        actor=people.approver, request=submitted, region_cu={"us-test": "10"}, comment="what fits"
    )
    charts = figures(_web(people.approver).get(f"/launch/{submitted.uuid}/").content.decode())
    granted_in, other = charts["chart-pool-b"], charts["chart-pool-a"]  # the default went to pool-b
    assert granted_in["data"][1]["name"] == "granted to this request (10.000 CU)"
    assert set(granted_in["data"][1]["y"]) == {10.0}
    # The grant is drawn once: "already sold" in pool-b leaves it out (else the stack shows 20).
    assert set(granted_in["data"][0]["y"]) == {0.0}
    assert set(other["data"][1]["y"]) == {0.0} and max(other["data"][0]["y"]) == 100.0
