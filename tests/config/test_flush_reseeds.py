"""A test-database flush puts back what data migrations seeded (tests/audit_flush.py): under xdist a
worker runs a file's plain tests after another file's transactional ones, which flushed the tables."""

import pytest
from django.core.management import call_command


@pytest.mark.django_db(transaction=True)
def test_a_flush_leaves_the_history_context_and_every_beat_schedule():
    from django_celery_beat.models import PeriodicTask

    from entitlements.models import HistoryContext

    before = set(PeriodicTask.objects.values_list("name", "task"))
    call_command("flush", interactive=False, verbosity=0)
    assert HistoryContext.objects.filter(id=1).exists()
    assert set(PeriodicTask.objects.values_list("name", "task")) == before
    assert ("admission: settle abandoned reservations", "admission.tasks.sweep_expired") in before


@pytest.mark.django_db(transaction=True)
def test_a_flush_leaves_no_history_behind(fleet):
    # Deleting entitlements fires their history triggers; the flush must not leave those rows.
    from entitlements.models import EntitlementHistory
    from entitlements.services import entitlement_grant
    from tests.factories import grant_kwargs

    entitlement_grant(**grant_kwargs(fleet.pool_a, fleet.acme, "2"), actor=fleet.operator, reason="test")
    assert EntitlementHistory.objects.count() == 1
    call_command("flush", interactive=False, verbosity=0)
    assert EntitlementHistory.objects.count() == 0
