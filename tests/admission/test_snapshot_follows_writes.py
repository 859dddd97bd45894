"""Every write path reaches the admission snapshot of a process that did not make the write.

The gateway process is modelled by disconnecting this process's save signals (`elsewhere`), so
what these tests see is only what the database triggers counted (admission.snapshot_triggers).
Writes commit for real (`transactional_db`): PostgreSQL bumps the counters when a writer commits.
ADMISSION_SNAPSHOT_CHECK_S = 0 makes the very next reserve read the counters; the interval itself
is tested on its own below.
"""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models.signals import post_delete, post_save
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from admission import params, services, snapshot_triggers
from admission.models import PoolHealthOverride
from entitlements import models as m
from entitlements.pool_services import pool_update
from entitlements.services import entitlement_grant, reserve_set
from tests import factories as f

SIGNALLED = (m.Entitlement, m.Pool, m.PoolZone, PoolHealthOverride)
R = 1000.0  # wt/s per CU of llama-test


@pytest.fixture
def elsewhere():
    """This process stops hearing its own ORM saves, like a gateway process that did not make them."""
    for model in SIGNALLED:
        post_save.disconnect(sender=model, dispatch_uid=f"admission-snap-{model.__name__}")
        post_delete.disconnect(sender=model, dispatch_uid=f"admission-snapdel-{model.__name__}")
    yield
    for model in SIGNALLED:
        post_save.connect(params.changed, sender=model, dispatch_uid=f"admission-snap-{model.__name__}")
        post_delete.connect(params.changed, sender=model, dispatch_uid=f"admission-snapdel-{model.__name__}")


@pytest.fixture
def ent(transactional_db, fleet, memory_store, sink, settings, elsewhere):
    settings.ADMISSION_SNAPSHOT_CHECK_S = 0
    e = grant(fleet, fleet.acme, "100")
    params.invalidate()
    return e


def grant(fleet, tenant, cu: str) -> m.Entitlement:
    kw = f.grant_kwargs(fleet.pool_a, tenant, Decimal(cu))
    return entitlement_grant(actor=fleet.operator, reason="test", **kw)


def reserve(tenant: str, n: int = 0) -> services.Decision:
    body = {"request_id": f"{tenant}-{n}-{timezone.now().timestamp()}", "tenant": tenant, "model": "llama-test",
            "region": "us-test", "traffic_class": "reserved", "prompt_tokens": 10, "max_output_tokens": 10}  # fmt: skip
    return services.reserve(services.parse_reserve(body))


def seen() -> params.Snapshot:
    """The snapshot the last reserve used."""
    assert params._current is not None
    return params._current


def deliverable_rate(pool: m.Pool) -> float:
    return float(m.Pool.objects.get(pk=pool.pk).deliverable_cu) * R


def test_service_grant_is_seen_by_the_next_reserve(ent, fleet):
    assert reserve("globex").body["reason"] == "NOT_ENTITLED"
    grant(fleet, fleet.globex, "10")
    assert reserve("globex").status == 200


def test_queryset_update_is_seen_by_the_next_reserve(ent):
    assert reserve("acme").status == 200
    m.Entitlement.objects.filter(pk=ent.pk).update(revoked_at=timezone.now())
    assert reserve("acme", 1).body["reason"] == "NOT_ENTITLED"


def test_raw_sql_update_is_seen_by_the_next_reserve(ent):
    assert reserve("acme").status == 200
    assert seen().lookup("acme", "", "llama-test", "us-test", "reserved").rate == 100 * R
    with connection.cursor() as cur:
        cur.execute("UPDATE entitlements_entitlement SET cu = 150 WHERE id = %s", [ent.pk])
    assert reserve("acme", 1).status == 200
    assert seen().lookup("acme", "", "llama-test", "us-test", "reserved").rate == 150 * R


def test_admin_save_of_a_pool_is_seen_by_the_next_reserve(ent, fleet, client):
    pool = fleet.pool_a
    assert reserve("acme").status == 200
    before = seen().pools[pool.pk].rate
    assert before == deliverable_rate(pool) == 280 * R
    client.force_login(f.UserFactory(username="root", is_staff=True, is_superuser=True))
    zones = list(m.PoolZone.objects.filter(pool=pool).order_by("pk"))
    data = {
        "slug": pool.slug, "model": pool.model_id, "region": pool.region_id, "accelerator": pool.accelerator_id,
        "operating_point": pool.operating_point_id, "accelerators_per_replica": pool.accelerators_per_replica,
        "maintenance_pct": 50, "safety_pct": 0, "fragmentation_pct": 0, "failure_policy": pool.failure_policy,
        "term": pool.term,
        "zones-TOTAL_FORMS": len(zones), "zones-INITIAL_FORMS": len(zones), "zones-MIN_NUM_FORMS": 0,
        "zones-MAX_NUM_FORMS": 1000, "reserves_held-TOTAL_FORMS": 0, "reserves_held-INITIAL_FORMS": 0,
        "reserves_held-MIN_NUM_FORMS": 0, "reserves_held-MAX_NUM_FORMS": 1000,
    }  # fmt: skip
    for i, z in enumerate(zones):
        data.update({f"zones-{i}-id": z.pk, f"zones-{i}-pool": pool.pk, f"zones-{i}-zone": z.zone_id,
                     f"zones-{i}-replicas": z.replicas})  # fmt: skip
    r = client.post(reverse("admin:entitlements_pool_change", args=[pool.pk]), data)
    assert r.status_code == 302, r.content.decode()[:2000]
    assert reserve("acme", 1).status == 200
    assert seen().pools[pool.pk].rate == deliverable_rate(pool) == 140 * R


def test_failover_reserve_change_is_seen_by_the_next_reserve(ent, fleet):
    assert reserve("acme").status == 200
    assert seen().pools[fleet.pool_a.pk].rate == 280 * R
    reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu="70")
    assert reserve("acme", 1).status == 200
    assert seen().pools[fleet.pool_a.pk].rate == deliverable_rate(fleet.pool_a) == 210 * R


def test_zone_change_is_seen_by_the_next_reserve(ent, fleet):
    assert reserve("acme").status == 200
    zone = m.PoolZone.objects.filter(pool=fleet.pool_a).order_by("pk").first().zone
    pool_update(pool=fleet.pool_a, zones=[(zone, 1)])
    assert reserve("acme", 1).status == 200
    assert seen().pools[fleet.pool_a.pk].rate == deliverable_rate(fleet.pool_a) == 210 * R


def test_fleet_sample_health_is_seen_by_the_next_reserve(ent, fleet):
    from telemetry.models import FleetSample

    assert reserve("acme").status == 200
    FleetSample.objects.create(pool=fleet.pool_a, ts=timezone.now(), replicas_healthy=2, replicas_total=4)
    assert reserve("acme", 1).status == 200
    assert (seen().pools[fleet.pool_a.pk].rate, seen().pools[fleet.pool_a.pk].health) == (140 * R, (2, 4))


def test_without_the_triggers_a_signal_less_write_stays_unseen(ent):
    """The negative control: the same `.update()` with the triggers taken out is missed."""
    assert reserve("acme").status == 200
    snapshot_triggers.uninstall(connection)
    try:
        m.Entitlement.objects.filter(pk=ent.pk).update(revoked_at=timezone.now())
        assert reserve("acme", 1).status == 200
    finally:
        snapshot_triggers.install(connection)


def test_only_the_part_that_moved_is_read_again(ent, fleet):
    from telemetry.models import FleetSample

    assert reserve("acme").status == 200
    FleetSample.objects.create(pool=fleet.pool_a, ts=timezone.now(), replicas_healthy=3, replicas_total=4)
    with CaptureQueriesContext(connection) as q:
        assert reserve("acme", 1).status == 200
    sql = [x["sql"] for x in q.captured_queries]
    assert snapshot_triggers.COUNTERS in sql[0]
    assert not [s for s in sql if "entitlements_entitlement" in s or "entitlements_pool" in s], sql
    assert seen().pools[fleet.pool_a.pk].health == (3, 4)


def test_between_checks_nothing_is_read_and_a_check_is_one_query(ent, settings):
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600
    assert reserve("acme").status == 200
    m.Entitlement.objects.filter(pk=ent.pk).update(revoked_at=timezone.now())
    with CaptureQueriesContext(connection) as q:
        assert reserve("acme", 1).status == 200  # within the interval: the write is not seen yet
    assert q.captured_queries == []
    params._next_check = 0.0  # the interval has passed
    assert reserve("acme", 2).body["reason"] == "NOT_ENTITLED"
    with CaptureQueriesContext(connection) as q:
        params._next_check = 0.0
        reserve("acme", 3)
    assert len(q.captured_queries) == 1  # nothing moved since: the counters alone


def test_a_window_start_is_seen_without_reading_the_rows_again(ent, fleet):
    start = timezone.now() + timedelta(seconds=3)  # room for a loaded machine to grant and reserve first
    entitlement_grant(
        actor=fleet.operator, reason="test", **f.grant_kwargs(fleet.pool_a, fleet.globex, "10", start=start)
    )
    assert reserve("globex").body["reason"] == "NOT_ENTITLED"
    time.sleep(max(0.0, (start - timezone.now()).total_seconds()) + 0.05)
    with CaptureQueriesContext(connection) as q:
        assert reserve("globex", 1).status == 200
    assert [x["sql"] for x in q.captured_queries if "entitlements_entitlement" in x["sql"]] == []
