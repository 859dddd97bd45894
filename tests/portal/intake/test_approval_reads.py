"""An approval reads each pool's sold peak once (issue 35's approval at 10,000 entitlements: the peak is a
sweep over every entitlement of the pool, ~a third of an approval there). The grant re-reads it under the
pools' locks, which is the read that protects against overselling; the placement before it reads it only
when it must choose among pools (no home pool, none named, more than one serving). Fleet: pool-a and
pool-b serve llama-test in us-test (tests/portal/intake/conftest.py)."""

from __future__ import annotations

import pytest

from entitlements import selectors
from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from portal.services import intake
from tests.factories import grant_kwargs

pytestmark = pytest.mark.django_db


@pytest.fixture
def peak_reads(monkeypatch):
    reads: list[int] = []
    real = selectors.peaks_sold_in_db

    # Every sold-peak read, one per pool set (headroom_rows reads its pools in one query, issue 52).
    def counted(qs, window, **kw):
        reads.append(1)
        return real(qs, window, **kw)

    monkeypatch.setattr(selectors, "peaks_sold_in_db", counted)
    return reads


def test_the_approver_names_the_pool_one_read_under_the_lock(fleet, people, submitted, peak_reads):
    intake.launch_request_approve(actor=people.approver, request=submitted, pools={"us-test": "pool-b"})
    assert Entitlement.objects.get(tenant=fleet.acme).pool == fleet.pool_b
    assert len(peak_reads) == 1  # was 4: two for the placement's table, the grant's choice, its check


def test_the_default_pool_reads_both_pools_then_the_chosen_one_under_the_lock(fleet, people, submitted, peak_reads):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    peak_reads.clear()
    intake.launch_request_approve(actor=people.approver, request=submitted)
    assert Entitlement.objects.get(tenant=fleet.acme).pool == fleet.pool_b  # the most headroom after the grant
    assert len(peak_reads) == 2  # was 4, then 3: both pools in one read (issue 52), then the chosen one


def test_a_scope_with_a_home_reads_only_its_home(fleet, people, submitted, peak_reads):
    home = entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_b, fleet.acme, "5", days=60))
    peak_reads.clear()
    intake.launch_request_approve(actor=people.approver, request=submitted)
    grants = Entitlement.objects.filter(tenant=fleet.acme).exclude(pk=home.pk)
    assert [g.pool for g in grants] == [fleet.pool_b]
    assert len(peak_reads) == 1  # was 5: the placement's two, the grant's two candidates and its check


def test_the_one_read_still_refuses_an_oversell(fleet, people, submitted, peak_reads):
    # pool-b is sold to 270 of its 280 CU: the approval's 26 CU do not fit there; nothing is granted.
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_b, fleet.globex, "270", days=400))
    peak_reads.clear()
    with pytest.raises(intake.HeadroomGone, match="not enough headroom in us-test"):
        intake.launch_request_approve(actor=people.approver, request=submitted, pools={"us-test": "pool-b"})
    assert not Entitlement.objects.filter(tenant=fleet.acme).exists()
    assert len(peak_reads) == 1
