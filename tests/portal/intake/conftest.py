"""People and requests for the intake tests.

Fleet (tests.factories.build_fleet): model llama-test (R 1000 wt/s, w_out 4), region us-test with
pool-a and pool-b (280 CU each). Here we add region eu-test with pool-eu (280 CU).
A complete request asks for 10 req/s committed with prompt p50/p95/max 1000/4000/6000 and output
200/800/2000: the envelope's capped-lognormal means are 1,384.69 and 283.18 tokens (capacity.envelope),
so 10 × (1,384.69 + 4 × 283.18) = 25,174 wt/s = 25.175 CU per region at the mean rate. What it asks
and an approval grants is the planning answer (portal.selectors.planning_answer, docs/contract.md §3): 10 req/s
replayed through one bucket as over-dispersed minutes (CV 0.21, seed 0) is throttled on 0.0747 % of
36,168 requests at 26.0 CU and 0.144 % at 25.9, so 26.000 CU at the reserved class's 0.1 % target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from entitlements.models import PlatformRole
from tests import factories as f
from tests.portal.intake.launch_fields import complete_fields


@dataclass
class People:
    requester: Any
    teammate: Any
    viewer: Any
    outsider: Any
    approver: Any
    approver2: Any
    self_approver: Any  # acme requester who is also an approver
    operator: Any
    gateway: Any


platform = f.platform_user
member = f.member


@pytest.fixture
def eu_pool(fleet):
    op = fleet.pool_a.operating_point
    return f.make_pool("pool-eu", op=op, region=f.RegionFactory(slug="eu-test", name="EU test"))


@pytest.fixture
def people(fleet):
    self_approver = member("acme-lead", fleet.acme, "requester")
    PlatformRole.objects.create(user=self_approver, role="approver")
    return People(
        requester=member("acme-req", fleet.acme, "requester"),
        teammate=member("acme-req2", fleet.acme, "requester"),
        viewer=member("acme-view", fleet.acme, "viewer"),
        outsider=member("globex-req", fleet.globex, "requester"),
        approver=platform("appr1", "approver"),
        approver2=platform("appr2", "approver"),
        self_approver=self_approver,
        operator=fleet.operator,
        gateway=platform("gw", "gateway"),
    )


@pytest.fixture
def draft(fleet, people):
    from portal.services.intake import launch_request_create

    return launch_request_create(actor=people.requester, **complete_fields(fleet))


@pytest.fixture
def submitted(draft, people):
    from portal.services.intake import launch_request_submit

    return launch_request_submit(actor=people.requester, request=draft)
