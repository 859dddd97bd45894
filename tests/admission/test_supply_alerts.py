"""Alertmanager supply alerts reach admission through pool health (issue 24), as fleet samples do.

Same set-up as test_snapshot_follows_writes: the alert is stored by the webhook's service in this
process with its save signals off, so only the database triggers tell the snapshot (another process).
"""

from __future__ import annotations

from django.utils import timezone

from telemetry.alertmanager import receive
from tests.admission.test_snapshot_follows_writes import R, elsewhere, ent, grant, reserve, seen  # noqa: F401

__all__ = ["elsewhere", "ent"]


def _alert(name, status, fp, instance):
    return {
        "status": status,
        "labels": {"alertname": name, "pool": "pool-a", "instance": instance},
        "startsAt": "2026-11-30T12:00:00Z",
        "endsAt": "2026-11-30T12:09:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "fingerprint": fp,
    }


def _hook(*alerts):
    return {"version": "4", "receiver": "headroom", "status": "firing", "alerts": list(alerts)}


def test_supply_alert_takes_a_replica_out_until_it_resolves(ent, fleet):
    pool = fleet.pool_a.pk
    assert reserve("acme").status == 200
    assert (seen().pools[pool].rate, seen().pools[pool].health) == (280 * R, None)

    receive(_hook(_alert("GPUMemoryHigh", "firing", "l1", "a:1")))  # load: evidence only
    assert reserve("acme", 1).status == 200
    assert (seen().pools[pool].rate, seen().pools[pool].health) == (280 * R, None)

    receive(_hook(_alert("ServiceDown", "firing", "s1", "a:1")))
    assert reserve("acme", 2).status == 200
    assert (seen().pools[pool].rate, seen().pools[pool].health) == (210 * R, (3, 4))

    receive(_hook(_alert("ServiceDown", "resolved", "s1", "a:1")))
    assert reserve("acme", 3).status == 200
    assert (seen().pools[pool].rate, seen().pools[pool].health) == (280 * R, None)


def test_supply_alert_and_a_fleet_sample_are_not_counted_twice(ent, fleet):
    from telemetry.models import FleetSample

    pool = fleet.pool_a.pk
    grant(fleet, fleet.globex, "150")  # 250 CU sold of 280
    receive(_hook(_alert("ServiceDown", "firing", "s1", "a:1"), _alert("ServiceDown", "firing", "s2", "a:2")))
    # a sample taken after one of the two went down already counts it: the lower of the two wins
    FleetSample.objects.create(pool=fleet.pool_a, ts=timezone.now(), replicas_healthy=3, replicas_total=4)
    assert reserve("acme").status == 200
    assert (seen().pools[pool].health, seen().pools[pool].rate) == ((2, 4), 140 * R)
    assert seen().pools[pool].degraded is True  # 140 CU left of 250 sold: PLATFORM_CAPACITY applies
