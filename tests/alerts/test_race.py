"""Two evaluation passes racing to open the same episode (a redelivered beat task, two workers):
the partial unique constraint lets one win, and people hear once. PostgreSQL, real threads, each
with its own connection, released together by a barrier. The negative control drops the
constraint for the duration of the test and shows the same race opening the episode twice."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from alerts.conditions import Finding
from alerts.evaluation import episode_open
from alerts.models import AlertEpisode, AlertRule, Notification
from tests import factories as f
from tests.alerts.conftest import now

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 8


def _race(rule: AlertRule) -> list[object]:
    barrier = threading.Barrier(THREADS)
    results: list[object] = []
    t = now()

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(episode_open(rule=rule, key="tenant:acme", finding=Finding("acme is throttled"), now=t))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    return results


def _setup():
    f.build_fleet()
    approver = f.platform_user("appr", "approver")
    rule = AlertRule.objects.create(name="p", scope="platform", kind="tenant_throttles_over", channels=[])
    return rule, approver


def test_racing_passes_open_one_episode_and_tell_people_once():
    rule, approver = _setup()
    results = _race(rule)
    assert len(results) == THREADS
    assert sum(r is not None for r in results) == 1
    assert AlertEpisode.objects.filter(rule=rule).count() == 1
    assert Notification.objects.filter(user=approver).count() == 1


def test_negative_control_without_the_constraint_the_race_opens_it_twice():
    rule, approver = _setup()
    constraint = next(c for c in AlertEpisode._meta.constraints if c.name == "alertepisode_one_open_per_subject")
    with connection.schema_editor() as editor:
        editor.remove_constraint(AlertEpisode, constraint)
    try:
        _race(rule)
        opened = AlertEpisode.objects.filter(rule=rule).count()
        assert opened > 1
        assert Notification.objects.filter(user=approver).count() == opened
    finally:
        AlertEpisode.objects.all().delete()
        with connection.schema_editor() as editor:
            editor.add_constraint(AlertEpisode, constraint)
