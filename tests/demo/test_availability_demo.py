"""Issue 52's must-show on the demo fleet (load_demo): for every served model and every tenant's requester,
GET /api/v1/availability lists every pool serving the model, none with more available than its headroom
over the window, the figure exactly what an approval allows (the figure is granted, 0.001 CU more is
refused), and no other tenant named."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from entitlements import models as m
from entitlements.selectors import Window, pool_sold_peak
from entitlements.services import OversellError, entitlement_grant
from tests import factories as f
from tests.clients import api_client

pytestmark = pytest.mark.django_db


class RolledBack(Exception):
    pass


def _grant(pool, tenant, cu, start, days):
    kw = f.grant_kwargs(pool, tenant, cu, start=start, days=days)
    # An envelope inside every demo model's context (llama-2-70b's is 4,096 tokens).
    kw["envelope"] = replace(f.ENVELOPE, max_prompt_tokens=3000, max_output_tokens=1000, prompt_p95=2500)
    return entitlement_grant(actor=None, reason="must-show check", **kw)


def _approval_allows_exactly(pool, tenant, cu, start, days):
    """The figure is granted and 0.001 CU more is refused (both rolled back: the demo stays as it was)."""
    with pytest.raises(OversellError), transaction.atomic():
        _grant(pool, tenant, cu + Decimal("0.001"), start, days)
    if cu > 0:
        with pytest.raises(RolledBack), transaction.atomic():
            assert _grant(pool, tenant, cu, start, days).cu == cu
            raise RolledBack


def test_the_demo_availability_must_show():
    call_command("load_demo", verbosity=0)
    today = timezone.now().date()
    start, days = today + timedelta(days=7), 30
    midnight = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    window = Window(midnight, midnight + timedelta(days=days))
    tenants = {t.pk: t for t in m.Tenant.objects.all()}
    checked_grants = 0
    for membership in m.Membership.objects.filter(role="requester").select_related("user", "tenant"):
        others = [t for pk, t in tenants.items() if pk != membership.tenant_id]
        for model in m.ServedModel.objects.filter(pools__isnull=False).distinct():
            pools = {p.slug: p for p in m.Pool.objects.filter(model=model)}
            region = next(iter(pools.values())).region.slug
            for cu in ("1", "100000"):
                q = {"model": model.slug, "region": region, "cu": cu, "from": start.isoformat(),
                     "until": (start + timedelta(days=days)).isoformat()}  # fmt: skip
                resp = api_client(membership.user).get("/api/v1/availability", q)
                assert resp.status_code == 200, resp.content
                rows = resp.json()["rows"]
                assert sorted(r["pool"] for r in rows) == sorted(pools), (model.slug, membership.tenant.slug)
                text = resp.content.decode().lower()
                for t in others:
                    assert t.slug.lower() not in text and t.name.lower() not in text, (t.slug, membership.tenant.slug)
                for r in rows:
                    pool = pools[r["pool"]]
                    headroom = max(Decimal(0), pool.deliverable_cu - pool_sold_peak(pool, window))
                    available = Decimal(r["available_cu"])
                    assert available <= headroom, r
                    elsewhere = "already lives in another pool" in r["why"]
                    assert available == (Decimal(0) if elsewhere else headroom), r
                    if cu == "1" and not elsewhere:
                        _approval_allows_exactly(pool, membership.tenant, available, midnight, days)
                        checked_grants += 1
    assert checked_grants == 18  # every row of the demo not answered "already lives in another pool"
