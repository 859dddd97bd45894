from decimal import Decimal

import pytest

from entitlements import models as m
from entitlements.services import entitlement_grant
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, fleet):
    fleet.operator.is_superuser = fleet.operator.is_staff = True
    fleet.operator.save()
    client.force_login(fleet.operator)
    return client


def pool_form(pool, zone_replicas):
    data = {
        "slug": pool.slug,
        "model": pool.model_id,
        "region": pool.region_id,
        "accelerator": pool.accelerator_id,
        "operating_point": pool.operating_point_id,
        "accelerators_per_replica": pool.accelerators_per_replica,
        "maintenance_pct": pool.maintenance_pct,
        "safety_pct": pool.safety_pct,
        "fragmentation_pct": pool.fragmentation_pct,
        "failure_policy": pool.failure_policy,
        "term": pool.term,  # issue 51: the price-list term the pool is bought on
        "reserves_held-TOTAL_FORMS": 0,
        "reserves_held-INITIAL_FORMS": 0,
        "zones-TOTAL_FORMS": len(zone_replicas),
        "zones-INITIAL_FORMS": len(zone_replicas),
    }
    for i, (pz, n) in enumerate(zone_replicas):
        data |= {
            f"zones-{i}-id": pz.pk,
            f"zones-{i}-pool": pool.pk,
            f"zones-{i}-zone": pz.zone_id,
            f"zones-{i}-replicas": n,
        }
    return data


def test_saving_a_pool_in_the_admin_refreshes_its_stored_totals(admin_client, fleet):
    pool = fleet.pool_a
    zones = list(pool.zones.all())
    assert pool.physical_cu == Decimal("280.000")

    resp = admin_client.post(
        f"/admin/entitlements/pool/{pool.pk}/change/", pool_form(pool, [(zones[0], 3), (zones[1], 3)])
    )

    assert resp.status_code == 302
    pool.refresh_from_db()
    assert pool.physical_cu == Decimal("420.000")  # 6 replicas × 70 CU, written by pool_refresh


def test_entitlements_are_read_only_in_the_admin_and_show_their_history(admin_client, fleet):
    ent = entitlement_grant(actor=fleet.operator, reason="first grant", **f.grant_kwargs(fleet.pool_a, fleet.acme, "5"))
    page = admin_client.get(f"/admin/entitlements/entitlement/{ent.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "first grant" in html
    assert 'name="cu"' not in html  # no editable field
    assert admin_client.get("/admin/entitlements/entitlement/add/").status_code == 403
    resp = admin_client.post(f"/admin/entitlements/entitlement/{ent.pk}/delete/", {"post": "yes"})
    assert resp.status_code == 403
    assert m.Entitlement.objects.filter(pk=ent.pk).exists()


def test_operating_points_list_shows_goodput(admin_client, fleet):
    html = admin_client.get("/admin/entitlements/operatingpoint/").content.decode()
    assert '<td class="field-goodput">70.0</td>' in html


def test_shrinking_a_sold_pool_in_the_admin_warns_that_it_is_oversold(admin_client, fleet):
    pool = fleet.pool_a
    entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(pool, fleet.acme, "200"))
    zones = list(pool.zones.all())

    resp = admin_client.post(
        f"/admin/entitlements/pool/{pool.pk}/change/", pool_form(pool, [(zones[0], 1), (zones[1], 1)]), follow=True
    )

    pool.refresh_from_db()
    assert pool.physical_cu == Decimal("140.000")
    assert [str(msg) for msg in resp.context["messages"]][0] == (
        "pool-a now delivers 140.0 CU but has sold up to 200.0 CU: "
        "it is oversold until supply returns or entitlements are amended."
    )
