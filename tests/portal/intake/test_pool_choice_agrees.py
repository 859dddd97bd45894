"""Issue 34.2: one pool choice. The sizing panel's "would take it" pool is the pool the approval
lands in, and the pool a grant without a named pool lands in (entitlements.pool_choice.choose_pool).

Fleet: pool-a (lower pk) and pool-b serve llama-test in us-test, 280 CU each. globex holds 100 CU
in pool-a over the window, so pool-a has 180 CU of headroom and pool-b 280: both have room for the
request's committed CU; pool-b has the most left after it.
"""

from __future__ import annotations

import re

from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from portal.services import intake
from tests.clients import web_client
from tests.factories import grant_kwargs


def _would_take_it(html: str) -> list[str]:
    return re.findall(r'<tr data-pool="([\w-]+)">\s*<td>[\w-]+ <small>\(would take it\)</small>', html)


def test_the_panels_pool_is_the_pool_the_approval_lands_in(fleet, people, submitted):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    page = web_client(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    panel = _would_take_it(page)
    intake.launch_request_approve(actor=people.approver, request=submitted)
    landed = Entitlement.objects.get(tenant=fleet.acme).pool.slug
    assert panel == [landed] == ["pool-b"]
    # The approval form's default agrees too.
    assert '<option value="pool-b" selected>' in page


def test_a_grant_without_a_pool_lands_where_the_panel_says(fleet, people, draft):
    entitlement_grant(actor=fleet.operator, reason="x", **grant_kwargs(fleet.pool_a, fleet.globex, "100", days=60))
    page = web_client(people.requester).get(f"/launch/{draft.uuid}/edit").content.decode()
    kwargs = grant_kwargs(fleet.pool_a, fleet.acme, "5", days=20) | {"pool": None}
    ent = entitlement_grant(actor=fleet.operator, reason="x", **kwargs)
    assert _would_take_it(page) == [ent.pool.slug] == ["pool-b"]
