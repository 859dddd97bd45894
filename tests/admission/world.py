"""A tiny pool where bucket arithmetic is easy to follow (shared by the admission tests).

Operating point: 10 out tok/s per replica on mix 300/100 → 0.07 CU per replica; 4 replicas =
0.28 CU = 280 wt/s (R = 1000), pool depth 16,800 wt, reclaim margin 3,360 wt.
Lender `acme` reserved 0.2 CU (200 wt/s, depth 12,000); borrower `globex` best_effort 0.05 CU
(50 wt/s, depth 3,000) with overage=borrow and a 0.05 CU borrowing limit (depth 3,000).
A request of prompt 200 + max_output 200 weighs 200 + 4 × 200 = 1,000 wt.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rest_framework.test import APIClient

from entitlements import models as m
from entitlements.services import entitlement_grant
from tests import factories as f


@dataclass
class World:
    fleet: Any
    pool: m.Pool
    lender: m.Entitlement
    borrower: m.Entitlement
    gateway: APIClient


def grant(fleet: Any, pool: m.Pool, tenant: m.Tenant, cu: str, cls: str, **kw: Any) -> m.Entitlement:
    args = f.grant_kwargs(pool, tenant, cu, traffic_class=cls)
    if "max_concurrency" in kw:
        args["envelope"] = dataclasses.replace(args["envelope"], max_concurrency=kw.pop("max_concurrency"))
    return entitlement_grant(actor=fleet.operator, reason="test", **args, **kw)


def client_for(username: str, role: str) -> APIClient:
    user = f.UserFactory(username=username)
    m.PlatformRole.objects.get_or_create(user=user, role=role)
    _, key = m.ApiToken.issue(user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def build_world(fleet: Any) -> World:
    op = f.OperatingPointFactory(out_tps_per_replica=10.0)
    pool = f.make_pool("pool-tiny", op=op, region=f.RegionFactory(slug="tiny-region"))
    lender = grant(fleet, pool, fleet.acme, "0.2", "reserved")
    borrower = grant(fleet, pool, fleet.globex, "0.05", "best_effort", overage="borrow", borrowing_limit_cu="0.05")
    return World(fleet, pool, lender, borrower, client_for("gw", "gateway"))


def body(tenant: str, cls: str, request_id: str, *, prompt: int = 200, out: int | None = 200, **kw: Any) -> dict:
    d = {"request_id": request_id, "tenant": tenant, "model": "llama-test", "region": "tiny-region",
         "traffic_class": cls, "prompt_tokens": prompt, **kw}  # fmt: skip
    if out is not None:
        d["max_output_tokens"] = out
    return d
