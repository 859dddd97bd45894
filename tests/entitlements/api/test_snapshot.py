from datetime import timedelta

import pytest
from django.utils import timezone

from entitlements.api.snapshot import if_none_match
from entitlements.models import Project
from entitlements.services import entitlement_amend, entitlement_grant, entitlement_revoke, reserve_set
from tests.factories import grant_kwargs

URL = "/api/v1/entitlements/snapshot"


def _grant(fleet, tenant, cu, **kw):
    return entitlement_grant(actor=fleet.operator, reason="t", **grant_kwargs(fleet.pool_a, tenant, cu, **kw))


@pytest.mark.parametrize("who", ["member", "teammate", "outsider", "approver", "operator"])
def test_only_gateways_read_the_snapshot(client_for, fleet, who):
    assert client_for(who).get(URL).status_code == 403


def test_snapshot_has_active_entitlements_with_enforcement_parameters(client_for, fleet):
    project = Project.objects.create(tenant=fleet.acme, slug="chat", name="Chat")
    kw = grant_kwargs(fleet.pool_a, fleet.acme, "12.5", traffic_class="best_effort")  # only best_effort borrows
    e = entitlement_grant(
        actor=fleet.operator, reason="t", project=project, overage="borrow", borrowing_limit_cu="3", **kw
    )
    _grant(fleet, fleet.globex, "5", start=timezone.now() + timedelta(days=1))  # not active yet
    gone = _grant(fleet, fleet.globex, "7")
    entitlement_revoke(actor=fleet.operator, reason="t", entitlement=gone)
    response = client_for("gateway").get(URL)
    assert response.status_code == 200
    body = response.json()
    assert response["ETag"] == f'"{body["version"]}"'
    assert body["entitlements"] == [
        {
            "uuid": str(e.uuid), "tenant": "acme", "project": "chat", "model": "llama-test", "region": "us-test",
            "pool": "pool-a", "traffic_class": "best_effort", "cu": 12.5,
            "rate_wt_per_s": 12_500.0, "bucket_depth_wt": 750_000.0, "w_out": 4.0, "w_cached": 0.0,
            "envelope": {
                "max_prompt_tokens": 8000, "max_output_tokens": 2000, "prompt_p50": 1000, "prompt_p95": 4000,
                "output_p50": 200, "output_p95": 800, "ttft_p99_ms": 2000, "tpot_p99_ms": 200, "streaming": True,
            },
            "max_concurrency": 64, "overage": "borrow", "borrowing_limit_cu": 3.0,
            "borrowing_limit_wt_per_s": 3000.0, "daily_budget": None, "monthly_budget": None, "budget_unit": "wt",
            "budget_tz": "UTC", "max_rps": None, "burst": None, "lending_limit_cu": None, "lending_limit": None, "weight": 1.0,
            "spillover": None, "overflow": "allow", "version": 1,
        }
    ]  # fmt: skip
    assert body["pools"] == [
        {"slug": "pool-a", "model": "llama-test", "region": "us-test", "deliverable_cu": 280.0, "rate_wt_per_s": 280_000.0},
        {"slug": "pool-b", "model": "llama-test", "region": "us-test", "deliverable_cu": 280.0, "rate_wt_per_s": 280_000.0},
    ]  # fmt: skip


@pytest.mark.django_db(transaction=True)  # PostgreSQL counts a write at its commit (admission.snapshot_stamp)
def test_etag_gives_304_until_something_changes(client_for, fleet):
    client = client_for("gateway")
    e = _grant(fleet, fleet.acme, "10")
    first = client.get(URL)
    etag = first["ETag"]
    unchanged = client.get(URL, HTTP_IF_NONE_MATCH=etag)
    assert (unchanged.status_code, unchanged.content, unchanged["ETag"]) == (304, b"", etag)
    _grant(fleet, fleet.globex, "20")
    after_grant = client.get(URL, HTTP_IF_NONE_MATCH=etag)
    assert after_grant.status_code == 200
    assert len(after_grant.json()["entitlements"]) == 2
    etag2 = after_grant["ETag"]
    assert etag2 != etag
    entitlement_amend(actor=fleet.operator, reason="t", entitlement=e, cu="11")
    after_amend = client.get(URL, HTTP_IF_NONE_MATCH=etag2)
    assert after_amend.status_code == 200
    etag3 = after_amend["ETag"]
    reserve_set(host_pool=fleet.pool_b, protected_pool=fleet.pool_a, cu="28")
    after_reserve = client.get(URL, HTTP_IF_NONE_MATCH=etag3)
    assert after_reserve.status_code == 200
    assert after_reserve.json()["pools"][1]["deliverable_cu"] == 252.0


def test_if_none_match_parsing():
    assert if_none_match('"abc"', "abc")
    assert if_none_match('W/"abc", "x"', "abc")
    assert if_none_match("*", "abc")
    assert not if_none_match('"abcd"', "abc")
    assert not if_none_match("", "abc")


def test_snapshot_queries_are_fixed(client_for, fleet, django_assert_max_num_queries):
    client = client_for("gateway")
    _grant(fleet, fleet.acme, "1")
    client.get(URL)
    for _ in range(5):
        _grant(fleet, fleet.globex, "1")
    # roles are cached on the user: the 304 stamp (the change counters, admission.snapshot_stamp), one
    # query for entitlements, one for pools; the "admission" block (admission.snapshot_export) brings the
    # serving path's snapshot up to date incrementally (admission.snapshot_delta): the counters with the
    # change log's last id, the log rows since, the written scopes summed in SQL and their entitlements
    # (admission.scope_sums: three queries however many), the usage an Atlas import left for this
    # process's store (admission.CarriedUsage: one query), the entitlements that name a spillover target
    # (admission.spill_params: one query) — fixed, not per entitlement
    with django_assert_max_num_queries(9):
        assert len(client.get(URL).json()["entitlements"]) == 6
