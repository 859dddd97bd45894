"""Two approvers approve the same request at the same instant, on real PostgreSQL connections.

Exactly one wins: the service locks the request row (select_for_update) and the FSM field's
ConcurrentTransitionMixin refuses a save whose state moved. The controls force the bad
interleaving: with the FSM guard alone one still wins; with neither guard both "win".
"""

import threading

import pytest
from django.db import connection

from entitlements.models import Entitlement
from portal.intake_selectors import ref
from portal.models import LaunchRequest
from portal.services import intake
from portal.services.intake import steps
from tests.portal.intake.launch_fields import complete_fields

TRIALS = 20


def _race(req, approvers):
    barrier = threading.Barrier(len(approvers))
    results = []

    def run(user):
        try:
            barrier.wait()
            intake.launch_request_approve(actor=user, request=req.uuid)
            results.append("won")
        except intake.LaunchRequestConflict:
            results.append("conflict")
        except Exception as exc:  # anything else is a failure the assertion should show
            results.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(u,)) for u in approvers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results)


def _submitted(fleet, people):
    # 1 req/s → 1.8 CU: twenty approvals fit in the pools with room to spare.
    req = intake.launch_request_create(actor=people.requester, **complete_fields(fleet, committed_value=1.0))
    return intake.launch_request_submit(actor=people.requester, request=req)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_racing_approvers_exactly_one_wins(fleet, people):
    for _ in range(TRIALS):
        req = _submitted(fleet, people)
        assert _race(req, [people.approver, people.approver2]) == ["conflict", "won"]
        assert LaunchRequest.objects.get(pk=req.pk).state == "approved"
        assert Entitlement.objects.filter(launch_request_region__request=req).count() == 1
        assert req.events.filter(transition="approve").count() == 1


def _unlocked_after_both_read(monkeypatch):
    """Replace the row lock with a plain read, and hold each approver until both have read the
    request as submitted: the interleaving the lock exists to prevent, made certain."""
    read = threading.Barrier(2)

    def unlocked(actor, request):
        req = LaunchRequest.objects.get(uuid=ref(request))
        if threading.current_thread() is not threading.main_thread():  # the racers, not the setup
            read.wait(timeout=30)
        return req

    monkeypatch.setattr(steps, "lock", unlocked)  # every write locks through steps.lock


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fsm_guard_alone_still_lets_one_win(fleet, people, monkeypatch):
    _unlocked_after_both_read(monkeypatch)
    for _ in range(3):
        req = _submitted(fleet, people)
        assert _race(req, [people.approver, people.approver2]) == ["conflict", "won"]
        assert Entitlement.objects.filter(launch_request_region__request=req).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_negative_control_without_guards_grants_twice(fleet, people, monkeypatch):
    _unlocked_after_both_read(monkeypatch)
    monkeypatch.setattr(LaunchRequest, "state_fields", property(lambda self: []))
    req = _submitted(fleet, people)
    assert _race(req, [people.approver, people.approver2]) == ["won", "won"]
    # Two grants for one request: the double approval the guards prevent.
    assert Entitlement.objects.filter(tenant=fleet.acme, region__slug="us-test").count() == 2
