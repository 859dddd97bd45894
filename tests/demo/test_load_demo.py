from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from demo.fleet import load_demo
from entitlements import models as m
from entitlements import roles
from entitlements.selectors import Window, pool_sold_peak

pytestmark = pytest.mark.django_db

COUNTED = [
    m.ServedModel,
    m.Region,
    m.Zone,
    m.Accelerator,
    m.OperatingPoint,
    m.Pool,
    m.PoolZone,
    m.FailoverReserve,
    m.Tenant,
    m.Project,
    m.Membership,
    m.PlatformRole,
    m.Entitlement,
    m.EntitlementHistory,
]


def snapshot():
    counts = {model.__name__: model.objects.count() for model in COUNTED}
    counts["users"] = get_user_model().objects.count()
    pools = {p.slug: (p.physical_cu, p.reserve_held_cu) for p in m.Pool.objects.all()}
    ents = sorted(m.Entitlement.objects.values_list("uuid", "cu", "version", "starts_at", "ends_at"))
    return counts, pools, ents


def test_load_demo_twice_changes_nothing():
    out = StringIO()
    call_command("load_demo", stdout=out)
    first = snapshot()
    call_command("load_demo", stdout=out)
    assert snapshot() == first
    # 23: the spilling EU support-bot grant and the second TPU borrower joined the 20 (issue 36's demo), and a
    # TPU launch from week 12 whose order arrives in time (issue 48.7)
    assert first[0]["Entitlement"] == 23
    assert first[0]["EntitlementHistory"] == 23  # one insert row each, none added by the second run
    assert "entitlements: 0 granted now, 23 in total" in out.getvalue()


def test_demo_fleet_has_the_promised_shape():
    load_demo()
    used = m.Pool.objects.values_list
    assert m.ServedModel.objects.count() == 8
    assert set(used("model__slug", flat=True).distinct()) == {
        "llama-2-70b",
        "llama-3.1-8b",
        "llama-3.1-405b",
        "mixtral-8x7b",
        "deepseek-r1",
        "llama-3-8b",
    }
    assert sorted(m.Region.objects.values_list("slug", flat=True)) == ["ap-south", "eu-west", "us-east"]
    assert all(r.zones.count() == 3 for r in m.Region.objects.all())
    assert set(used("accelerator__slug", flat=True).distinct()) == {
        "h100-80gb",
        "h200-141gb",
        "b200-180gb",
        "tpu-v5e-8",
    }
    assert m.Pool.objects.count() == 9
    assert set(used("region__slug", flat=True).distinct()) == {"us-east", "eu-west", "ap-south"}
    # Every pool runs on a latency-bounded point except the TPU pool (no such point is published).
    assert list(m.Pool.objects.filter(operating_point__is_ceiling=True).values_list("slug", flat=True)) == [
        "llama-3-8b-ap-south-tpu-v5e"
    ]
    assert m.FailoverReserve.objects.filter(protected_zone__isnull=True).count() == 1
    assert m.FailoverReserve.objects.filter(protected_zone__isnull=False).count() == 1
    assert m.Pool.objects.get(slug="llama-2-70b-us-east-b200").reserve_held_cu == 102
    assert sorted(m.Tenant.objects.values_list("slug", flat=True)) == ["acme", "globex", "initech", "umbrella"]
    assert set(m.Entitlement.objects.values_list("traffic_class", flat=True)) == {"reserved", "shared", "best_effort"}


def test_no_demo_pool_is_oversold_now_or_later():
    load_demo()
    now = timezone.now()
    for pool in m.Pool.objects.all():
        sold = pool_sold_peak(pool, Window(now, None))
        assert sold <= pool.deliverable_cu, pool.slug
    # Realistic headroom: one pool nearly full, one with lots of room.
    h200 = m.Pool.objects.get(slug="llama-2-70b-us-east-h200")
    roomy = m.Pool.objects.get(slug="llama-3.1-8b-eu-west-h200")
    assert pool_sold_peak(h200, Window(now, None)) / h200.deliverable_cu > 0.9
    assert pool_sold_peak(roomy, Window(now, None)) / roomy.deliverable_cu < 0.3


def test_demo_users_have_their_roles_and_the_demo_password():
    load_demo()
    User = get_user_model()
    expected = {
        "demo-operator": ({"operator"}, None),
        "demo-approver": ({"approver"}, None),
        "demo-requester": ({"requester"}, "acme"),
        "demo-viewer": ({"viewer"}, "acme"),
        "demo-outsider": ({"requester"}, "globex"),
        "demo-gateway": ({"gateway"}, None),
    }
    for username, (role_set, tenant) in expected.items():
        user = User.objects.get(username=username)
        assert user.check_password("demo"), username
        assert set(roles.roles_of(user)) == role_set, username
        assert (roles.tenant_of(user).slug if roles.tenant_of(user) else None) == tenant, username
    operator = User.objects.get(username="demo-operator")
    assert operator.is_staff is True
    assert operator.has_perm("entitlements.change_pool") is True
    assert User.objects.filter(is_staff=True).values_list("username", flat=True).get() == "demo-operator"


def test_demo_grants_are_recorded_with_actor_and_reason():
    load_demo()
    operator = get_user_model().objects.get(username="demo-operator")
    history = m.EntitlementHistory.objects.all()
    assert history.count() == 23
    assert set(history.values_list("actor_id", flat=True)) == {operator.pk}
    assert all(h.reason.startswith("demo fleet: ") for h in history)


def test_demo_follows_the_reserve_scope_and_borrowing_rules():
    load_demo()
    for r in m.FailoverReserve.objects.select_related("host_pool", "protected_pool"):
        assert r.host_pool.model_id == r.protected_pool.model_id, str(r)
        if r.protected_zone_id:
            # Only host replicas outside the protected zone hold the reserve.
            outside = sum(z.replicas for z in r.host_pool.zones.exclude(zone_id=r.protected_zone_id))
            assert r.cu <= outside * r.host_pool.cu_per_replica, str(r)
    b200 = m.FailoverReserve.objects.get(host_pool__slug="llama-2-70b-us-east-b200")
    assert (b200.protected_pool.slug, b200.protected_zone.slug) == ("llama-2-70b-us-east-h200", "us-east-a")
    scopes = {}
    for e in m.Entitlement.objects.filter(revoked_at__isnull=True):
        scopes.setdefault((e.tenant_id, e.project_id, e.model_id, e.region_id, e.traffic_class_id), set()).add(
            e.pool_id
        )
    assert all(len(pools) == 1 for pools in scopes.values())
    borrowing = m.Entitlement.objects.exclude(borrowing_limit_cu=0)
    assert set(borrowing.values_list("traffic_class", flat=True)) == {"best_effort"}
    assert borrowing.count() == 4  # umbrella's TPU best_effort grant (weight 3) joined acme's (weight 1)
    spiller = m.Entitlement.objects.get(spillover_target__isnull=False)
    assert (spiller.tenant.slug, spiller.pool.slug, spiller.spillover_target.pool.slug) == (
        "acme",
        "llama-2-70b-eu-west-h100",
        "llama-2-70b-us-east-h200",
    )
    lender = m.Entitlement.objects.get(lending_limit_cu__isnull=False)
    assert (lender.pool.slug, lender.cu, lender.lending_limit_cu) == (
        "llama-3-8b-ap-south-tpu-v5e",
        Decimal("15.5"),
        Decimal("5.1"),
    )
    weights = m.Entitlement.objects.filter(pool=lender.pool, traffic_class="best_effort")
    assert sorted(weights.values_list("weight", flat=True)) == [1.0, 3.0]
