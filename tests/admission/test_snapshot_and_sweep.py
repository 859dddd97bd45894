"""The hot path reads a cached snapshot (no queries per request); expiry is swept; events reach telemetry."""

from __future__ import annotations

import time

import pytest

from admission import events, params, services, snapshot_reads, tasks
from admission.backends.memory import MemoryBackend
from telemetry.models import AdmissionEvent
from telemetry.services import ingest_events
from tests.admission.world import body, build_world


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


def reserve(b: dict):
    return services.reserve(services.parse_reserve(b))


def test_reserve_does_not_query_the_database_once_the_snapshot_is_warm(w, settings, django_assert_num_queries):
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600  # between counter checks (test_snapshot_follows_writes: the check)
    reserve(body("acme", "reserved", "warm"))
    with django_assert_num_queries(0):
        for i in range(20):
            assert reserve(body("acme", "reserved", f"hot{i}", prompt=10, out=10)).status == 200


def test_snapshot_follows_entitlement_changes_in_this_process(w, fleet):
    from entitlements.services import entitlement_revoke

    assert reserve(body("acme", "reserved", "before")).status == 200
    entitlement_revoke(actor=fleet.operator, reason="test", entitlement=w.lender)
    assert reserve(body("acme", "reserved", "after")).body["reason"] == "NOT_ENTITLED"


def test_snapshot_rebuilds_when_its_ttl_passes(w, settings):
    snap = params.current()
    assert params.current() is snap
    params._current = params.Snapshot(snap.scopes, snap.pools, snap.placements, time.monotonic() - 1, snap.version)
    assert params.current().version == snap.version + 1


def test_pool_bucket_scales_with_telemetry_health_and_override_wins(w, monkeypatch, fleet):
    monkeypatch.setattr(snapshot_reads, "latest_pool_health", lambda pool_id: (2, 4) if pool_id == w.pool.pk else None)
    params.invalidate()
    p = params.current().pools[w.pool.pk]
    assert (p.rate, p.depth, p.health, p.degraded) == (140.0, 8400.0, (2, 4), True)
    assert p.reserved_floor == -12_000.0
    services.set_pool_health(pool=w.pool, replicas_healthy=4, replicas_total=4, actor=fleet.operator)
    p = params.current().pools[w.pool.pk]
    assert (p.rate, p.health, p.degraded) == (280.0, (4, 4), False)


def test_sweep_task_settles_abandoned_reservations_at_full_estimate(w, settings, sink):
    settings.ADMISSION_RESERVATION_TTL_S = 0.05
    d = reserve(body("acme", "reserved", "gone"))
    time.sleep(0.1)
    assert tasks.sweep_expired() == 1
    assert tasks.sweep_expired() == 0
    done = sink.of("complete")
    assert [(e["event_id"], e["status"], e["actual_wt"], e["estimated_wt"]) for e in done] == [
        ("gone:complete", "expired", 1000.0, 1000.0)
    ]
    late = services.complete(services.parse_complete({"reservation_id": d.body["reservation_id"], "prompt_tokens": 1,
                                                      "output_tokens": 1, "status": "ok"}))  # fmt: skip
    assert (late[0], late[1]["status"], late[1]["refunded_wt"]) == (200, "expired", 0)


def test_events_are_accepted_by_telemetry(w, fleet):

    buf = events.EventBuffer(
        lambda batch: ingest_events(source="admission", events=batch), flush_s=3600, autostart=False
    )
    prev = events.set_buffer(buf)
    try:
        d = reserve(body("acme", "reserved", "tele-1"))
        reserve(body("acme", "reserved", "tele-2", prompt=9999))
        services.complete(services.parse_complete({"reservation_id": d.body["reservation_id"], "prompt_tokens": 200,
                                                   "output_tokens": 50, "status": "ok", "ttft_ms": 100,
                                                   "e2e_ms": 900}))  # fmt: skip
        assert buf.flush() == 3
        assert (buf.stats()["rejected"], buf.stats()["sink_failures"]) == (0, 0)
        assert ingest_events(source="admission", events=[]).accepted == 0
    finally:
        buf.stop(flush=False)
        events.set_buffer(prev)


def test_memory_backend_is_the_embedded_default(settings):
    from admission.backends import build_backend

    settings.ADMISSION_BACKEND = "memory"
    assert isinstance(build_backend(), MemoryBackend)


def test_default_sink_ingests_inline_without_a_broker(w, settings, sink):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    reserve(body("acme", "reserved", "inline-1"))
    events.buffer().flush()
    result = tasks.default_sink(sink.events)
    assert (result.accepted, result.errors) == (1, [])
    assert tasks.default_sink(sink.events).duplicates == 1


def test_the_buffer_sends_to_the_sink_ready_configured(w, settings):
    """A buffer made without a sink uses the one AdmissionConfig.ready() gave admission.events."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    buf = events.EventBuffer(flush_s=3600, autostart=False)
    prev = events.set_buffer(buf)
    try:
        reserve(body("acme", "reserved", "ready-1"))
        assert buf.flush() == 1
        assert AdmissionEvent.objects.filter(source="admission", event_id__startswith="ready-1").count() == 1
    finally:
        events.set_buffer(prev)


@pytest.mark.django_db
def test_the_sweep_is_scheduled_in_the_database():
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(task="admission.tasks.sweep_expired")
    assert (task.enabled, task.interval.every, task.interval.period) == (True, 30, "seconds")
