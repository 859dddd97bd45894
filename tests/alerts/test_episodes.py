"""One alert per rule and episode: a rule that stays true fires once, and again only after it resolved."""

from __future__ import annotations

from alerts.conditions import Finding
from alerts.evaluation import alert_rules_evaluate, episode_open
from alerts.models import AlertEpisode, Notification
from tests.alerts.conftest import minutes, now, rule, traffic


def _inbox(user):
    return list(Notification.objects.filter(user=user).values_list("kind", "title"))


def test_rule_that_stays_true_fires_once_and_again_only_after_it_resolved(
    fleet, people, django_capture_on_commit_callbacks
):
    t = now()
    r = rule(name="acme throttles", scope="tenant", tenant=fleet.acme, threshold=10, window_minutes=15, channels=[])
    # 10 admits and 5 of the tenant's own throttles: 33 % > 10 %.
    traffic(t - minutes(40), admits=10, throttles=5, tag="A")

    assert alert_rules_evaluate(now=t - minutes(35))["opened"] == 1
    assert alert_rules_evaluate(now=t - minutes(34))["opened"] == 0  # still true: nobody hears twice
    assert alert_rules_evaluate(now=t - minutes(30))["opened"] == 0
    assert AlertEpisode.objects.filter(rule=r).count() == 1
    title = "acme throttles: acme: 33.3 % of 15 requests throttled for the tenant's own limits over 15 min"
    assert _inbox(people.viewer) == [("alert.opened", title)]
    assert _inbox(people.requester) == [("alert.opened", title)]
    assert _inbox(people.outsider) == [] and _inbox(people.approver) == []

    # The window moves past the throttles: the episode resolves, and people are not told again.
    assert alert_rules_evaluate(now=t - minutes(10))["resolved"] == 1
    ep = AlertEpisode.objects.get(rule=r)
    assert ep.resolved_at == t - minutes(10)
    assert len(_inbox(people.viewer)) == 1

    # True again: a second episode, a second alert.
    traffic(t - minutes(3), admits=2, throttles=2, tag="B")
    assert alert_rules_evaluate(now=t)["opened"] == 1
    assert AlertEpisode.objects.filter(rule=r).count() == 2
    assert [k for k, _ in _inbox(people.viewer)] == ["alert.opened", "alert.opened"]


def test_below_threshold_does_not_fire(fleet, people):
    t = now()
    rule(scope="tenant", tenant=fleet.acme, threshold=50, channels=[])
    traffic(t - minutes(2), admits=10, throttles=5)  # 33 %
    assert alert_rules_evaluate(now=t)["opened"] == 0
    assert Notification.objects.count() == 0


def test_platform_throttles_do_not_count_against_the_tenant(fleet, people):
    t = now()
    rule(scope="tenant", tenant=fleet.acme, threshold=10, channels=[])
    traffic(t - minutes(2), admits=10, throttles=5, reason="PLATFORM_CAPACITY")
    assert alert_rules_evaluate(now=t)["opened"] == 0


def test_opening_the_same_episode_twice_tells_people_once(fleet, people):
    """Two passes racing: the database's one-open-episode constraint makes the second a no-op."""
    r = rule(name="platform", channels=[])
    finding = Finding("acme is throttled", fleet.acme, {})
    first = episode_open(rule=r, key="tenant:acme", finding=finding, now=now())
    second = episode_open(rule=r, key="tenant:acme", finding=finding, now=now())
    assert first is not None and second is None
    assert AlertEpisode.objects.filter(rule=r).count() == 1
    # platform rule: approvers and operators hear it, once each
    assert Notification.objects.filter(user=people.approver).count() == 1
    assert Notification.objects.filter(user=people.operator).count() == 1
    assert Notification.objects.filter(user=people.viewer).count() == 0


def test_disabling_a_rule_ends_its_open_episode(fleet, people):
    t = now()
    r = rule(scope="tenant", tenant=fleet.acme, threshold=10, channels=[])
    traffic(t - minutes(2), admits=10, throttles=5)
    alert_rules_evaluate(now=t)
    r.enabled = False
    r.save()
    alert_rules_evaluate(now=t + minutes(1))
    assert AlertEpisode.objects.get(rule=r).resolved_at == t + minutes(1)
