"""The tenant home's used ÷ bought meters (issue 35.4) read every window's rollups for all of a tenant's
entitlements in ONE grouped query (telemetry.usage.Scopes.read), cached per tenant for a moment
(portal.usage_meters.tenant_usages), and each meter is the evidence statement's own figure, exactly."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from demo.findings import seed_findings
from demo.history import seed_history
from entitlements.models import Entitlement, Tenant
from entitlements.services import entitlement_grant
from portal.usage_meters import tenant_usages, usages_of
from telemetry.budgets import budget_usage
from telemetry.models import MinuteRollup
from telemetry.statement import statement
from telemetry.usage import scope_key
from tests.factories import grant_kwargs, member


@pytest.mark.django_db
def test_every_demo_entitlements_meters_are_its_statements_figures_exactly():
    # given the demo with two days of history, the findings' minute rows, and budgets in every unit
    call_command("load_demo", stdout=StringIO())
    now = timezone.now()
    seed_history(days=2, now=now)
    seed_findings(now.replace(minute=0, second=0, microsecond=0))
    ents = list(Entitlement.objects.order_by("pk"))
    for i, e in enumerate(ents[::2]):
        Entitlement.objects.filter(pk=e.pk).update(
            daily_budget=10**8, monthly_budget=10**10, budget_unit=("wt", "tokens", "requests")[i % 3]
        )
    ents = list(Entitlement.objects.select_related("tenant", "project", "model", "region").order_by("pk"))
    _settled_minutes(ents[:6], now)
    assert len(ents) == 23 and len({e.tenant_id for e in ents}) == 4
    # when every tenant's meters are read at once, per tenant
    got = {}
    for tenant in Tenant.objects.filter(entitlements__isnull=False).distinct():
        got |= tenant_usages(tenant.pk, [e for e in ents if e.tenant_id == tenant.pk], now)
    # then each meter is the statement's figure for the meter's period, to the last digit
    compared = 0
    for e in ents:
        u = got[e.pk]
        for m in u.meters:
            assert m.share == statement(e, m.start, m.end)["used"][m.field.removeprefix("used.")], (e.pk, m.key)
            compared += 1
        assert u.budget == budget_usage(e, at=now)
    assert compared == 3 * len(ents)
    # and some of them used something (the comparison is not of zeros alone)
    assert sum(1 for e in ents if (got[e.pk].meters[-1].share or 0) > 0) >= 15
    assert sum(1 for e in ents if (got[e.pk].meters[0].share or 0) > 0) >= 6  # now
    assert sum(1 for e in ents if (got[e.pk].meters[1].share or 0) > 0) >= 6  # 24 h peak minute


def _settled_minutes(ents: list[Entitlement], now) -> None:
    """Completions in a few minutes of the last hour and the last day (the "now" and peak meters), some
    named on the entitlement, some unattributed in its exact scope (shared by every entitlement there)."""
    minute = now.replace(second=0, microsecond=0)
    rows = []
    for i, e in enumerate(ents):
        tenant, project, model, region, traffic_class = scope_key(e)
        for back, named in ((3 + i, True), (7 + i, False), (300 + 11 * i, True), (1000 + i, False)):
            rows.append(
                MinuteRollup(
                    bucket=minute - timedelta(minutes=back),
                    tenant=tenant,
                    project=project,
                    model=model,
                    region=region,
                    traffic_class=traffic_class,
                    entitlement=str(e.uuid) if named else "",
                    decision="complete",
                    requests=2 + i,
                    actual_wt=12345.678 * (i + 1) + back / 7,
                )  # fmt: skip
            )
    MinuteRollup.objects.bulk_create(rows, ignore_conflicts=True)


def _grant(fleet, n: int) -> None:
    for i in range(n):
        cls = ("reserved", "shared", "best_effort")[i % 3]
        entitlement_grant(
            **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("1"), traffic_class=cls), actor=fleet.operator, reason="t"
        )
    Entitlement.objects.filter(pk__in=list(Entitlement.objects.values_list("pk", flat=True)[::2])).update(
        daily_budget=10**9, monthly_budget=10**10, budget_unit="wt"
    )


def _home(client: Client) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    return [q["sql"].lower() for q in ctx.captured_queries]


def _rollup_reads(sqls: list[str]) -> int:
    return sum(1 for s in sqls if "rollup" in s)


def _viewer(fleet, n: int) -> Client:
    """A viewer of acme, which holds n entitlements; its first page is served (the session and the content
    types are read once per process) and the cache emptied."""
    _grant(fleet, n)
    client = Client()
    client.force_login(member("viewer", fleet.acme, "viewer"))
    _home(client)
    cache.clear()
    return client


@pytest.mark.django_db
def test_tenant_home_reads_as_many_queries_for_3_as_for_30_entitlements_and_one_of_rollups(fleet):
    client = _viewer(fleet, 3)
    three = _home(client)
    _grant(fleet, 27)
    assert Entitlement.objects.filter(tenant=fleet.acme).count() == 30
    cache.clear()
    thirty = _home(client)
    assert len(thirty) == len(three), f"{len(three)} queries for 3 entitlements, {len(thirty)} for 30"
    # every window (now, the 24 h peak's minutes, 30 days, the budgets' day and month) in one statement
    assert _rollup_reads(three) == _rollup_reads(thirty) == 1


@pytest.mark.django_db
def test_tenant_home_meters_are_cached_for_the_tenant_and_a_new_grant_reads_afresh(fleet, monkeypatch):
    client = _viewer(fleet, 3)
    at = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: at)  # both pages within one minute
    first = _home(client)
    again = _home(client)
    assert _rollup_reads(first) == 1
    assert _rollup_reads(again) == 0
    assert len(again) == len(first) - 2  # neither the history nor the rollups were read again
    _grant(fleet, 1)  # another entitlement: another key
    assert _rollup_reads(_home(client)) == 1


@pytest.mark.django_db
def test_the_cached_answer_is_the_computed_one(fleet):
    _grant(fleet, 3)
    ents = list(Entitlement.objects.select_related("tenant", "project", "model", "region").order_by("pk"))
    now = timezone.now()
    cache.clear()
    computed = usages_of(ents, now)
    assert tenant_usages(fleet.acme.pk, ents, now) == computed  # a miss: computed and stored
    assert tenant_usages(fleet.acme.pk, ents, now) == computed  # a hit: read back whole
