from decimal import Decimal

import pytest

from entitlements import models as m
from entitlements.services import entitlement_grant, reserve_set
from tests import factories as f

pytestmark = pytest.mark.django_db


def member(username, tenant, role="requester"):
    user = f.UserFactory(username=username)
    m.Membership.objects.create(user=user, tenant=tenant, role=role)
    return user


def platform(username, role):
    user = f.UserFactory(username=username)
    m.PlatformRole.objects.create(user=user, role=role)
    return user


def test_anonymous_is_sent_to_login(client):
    resp = client.get("/")
    assert resp.status_code == 302
    assert resp["Location"] == "/login/?next=/"


def test_operator_home_shows_each_pool_with_exact_numbers(client, fleet):
    reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=30, note="covers B")
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_a, fleet.acme, "100"))
    entitlement_grant(
        actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_b, fleet.globex, "50", traffic_class="shared")
    )
    # best effort is not sold: it must not change the numbers below
    entitlement_grant(
        actor=fleet.operator,
        reason="t",
        **f.grant_kwargs(fleet.pool_b, fleet.globex, "500", traffic_class="best_effort"),
    )
    big = f.make_pool(
        "pool-big",
        op=fleet.pool_a.operating_point,
        replicas_per_zone=(10, 10),
        maintenance_pct=5,
        safety_pct=5,
        fragmentation_pct=2,
    )
    client.force_login(fleet.operator)

    resp = client.get("/")

    assert resp.status_code == 200
    rows = {r["slug"]: r for r in resp.context["rows"]}
    keys = ("accelerator", "replicas", "cu_per_replica", "physical", "deliverable", "sold", "headroom", "util_pct")
    assert {s: tuple(rows[s][k] for k in keys) for s in rows} == {
        "pool-a": ("h100-test ×8", 4, "70.0", "280.0", "250.0", "100.0", "150.0", "40"),
        "pool-b": ("h100-test ×8", 4, "70.0", "280.0", "280.0", "50.0", "230.0", "18"),
        "pool-big": ("h100-test ×8", 20, "70.0", "1,400.0", "1,232.0", "0.0", "1,232.0", "0"),
    }
    assert rows["pool-a"]["zones"] == [("us-test-a", "a", 2), ("us-test-b", "b", 2)]
    assert rows["pool-a"]["reserves_held"] == ["30.0 CU for pool pool-b — covers B"]
    assert rows["pool-b"]["protected_by"] == ["30.0 CU held in pool-a"]
    assert rows["pool-big"]["segments"] == [
        ("sold", "0.0"),
        ("headroom", "1,232.0"),
        ("failover reserve", "0.0"),
        ("maintenance", "70.0"),
        ("safety margin", "70.0"),
        ("fragmentation", "28.0"),
    ]
    html = resp.content.decode()
    assert '<tr id="pool-pool-big">' in html
    assert '<td class="num">1,232.0</td>' in html
    assert "10,000 output tok/s × (4 + 300 / 100 prompt per output token) ÷ R 1,000 wt/s" in html
    assert big.pk  # the pool the third row shows


def test_approver_sees_the_pools_too(client, fleet):
    client.force_login(platform("appr", "approver"))
    resp = client.get("/")
    assert resp.status_code == 200
    assert [r["slug"] for r in resp.context["rows"]] == ["pool-a", "pool-b"]


def test_htmx_request_gets_only_the_pools_partial(client, fleet):
    client.force_login(fleet.operator)
    resp = client.get("/", headers={"HX-Request": "true"})
    html = resp.content.decode()
    assert resp.status_code == 200
    assert html.lstrip().startswith('<section id="pools">')
    assert "<nav" not in html


def test_tenant_home_shows_own_entitlements_and_nothing_of_another_tenant(client, fleet):
    project = m.Project.objects.create(tenant=fleet.acme, slug="support-bot", name="Support bot")
    mine = entitlement_grant(
        actor=fleet.operator, reason="t", project=project, **f.grant_kwargs(fleet.pool_a, fleet.acme, "12.5")
    )
    theirs = entitlement_grant(
        actor=fleet.operator,
        reason="t",
        **f.grant_kwargs(fleet.pool_b, fleet.globex, "77.7", traffic_class="shared"),
    )
    client.force_login(member("amy", fleet.acme, role="viewer"))

    resp = client.get("/")

    assert resp.status_code == 200
    rows = resp.context["rows"]
    assert [(r["uuid"], r["model"], r["region"], r["project"], r["traffic_class"]) for r in rows] == [
        (mine.uuid, "llama-test", "us-test", "support-bot", "reserved")
    ]
    row = rows[0]
    assert (row["cu"], row["wt_per_s"], row["status"], row["version"]) == ("12.5", "12,500", "active", 1)
    assert row["prompt"] == "≤ 8,000 (p50 1,000, p95 4,000)"
    assert row["output"] == "≤ 2,000 (p50 200, p95 800)"
    assert row["latency"] == "TTFT p99 2,000 ms · TPOT p99 200 ms"
    assert (row["overage"], row["borrowing_limit"]) == ("Throttle above the entitlement", "0.0")
    html = resp.content.decode()
    assert str(mine.uuid) in html
    assert str(theirs.uuid) not in html
    assert "77.7" not in html
    assert "pool-a" not in html  # supply stays behind the product boundary


def test_outsider_sees_only_their_tenant(client, fleet):
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_a, fleet.acme, "12.5"))
    theirs = entitlement_grant(
        actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_b, fleet.globex, "7", traffic_class="shared")
    )
    client.force_login(member("otto", fleet.globex))
    resp = client.get("/")
    assert [(r["uuid"], r["cu"]) for r in resp.context["rows"]] == [(theirs.uuid, "7.0")]


def test_gateway_and_roleless_people_get_403(client, fleet):
    client.force_login(platform("gw", "gateway"))
    assert client.get("/").status_code == 403
    client.force_login(f.UserFactory(username="nobody"))
    assert client.get("/").status_code == 403


def test_nav_follows_roles(client, fleet):
    client.force_login(member("vic", fleet.acme, role="viewer"))
    html = client.get("/").content.decode()
    assert '<a href="/" aria-current="page">Entitlements</a>' in html
    assert 'href="/fleet/"' not in html
    assert 'href="/admin/"' not in html
    assert "Acme" in html  # their tenant next to their name

    fleet.operator.is_staff = True
    fleet.operator.save()
    client.force_login(fleet.operator)
    html = client.get("/").content.decode()
    assert '<a href="/" aria-current="page">Pools</a>' in html
    assert 'href="/fleet/"' in html
    assert 'href="/admin/"' in html
    assert 'hx-headers=\'{"X-CSRFToken": "' in html


def test_login_and_logout(client, fleet):
    assert client.get("/login/").status_code == 200
    resp = client.post("/login/", {"username": "op", "password": "demo"})
    assert (resp.status_code, resp["Location"]) == (302, "/")
    assert client.get("/").status_code == 200
    resp = client.post("/logout/")
    assert (resp.status_code, resp["Location"]) == (302, "/login/")
    assert client.get("/").status_code == 302


def test_wrong_password_stays_on_login(client, fleet):
    resp = client.post("/login/", {"username": "op", "password": "nope"})
    assert resp.status_code == 200
    assert resp.context["user"].is_authenticated is False


def test_sold_counts_only_what_is_active_now(client, fleet):
    from datetime import timedelta

    from django.utils import timezone

    later = timezone.now() + timedelta(days=3)
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_a, fleet.acme, "40", start=later))
    client.force_login(fleet.operator)
    rows = {r["slug"]: r for r in client.get("/").context["rows"]}
    assert (rows["pool-a"]["sold"], rows["pool-a"]["headroom"]) == ("0.0", "280.0")
    assert Decimal(rows["pool-a"]["physical"]) == Decimal("280.0")
