"""Issue 35.2: the snapshot's refresher thread (ADMISSION_SNAPSHOT_BACKGROUND, admission.params).

A write made elsewhere reaches the held snapshot with no request calling the refresh; a window
boundary is met by the refresher waking at it; a database error does not end the thread; this
process's own save is still seen by its very next call. The held snapshot is read directly
(params._current): calling params.current() could refresh on the test's thread and prove nothing.
Waits are bounded loops on what the snapshot holds, never a limit on how fast it gets there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from admission import params
from entitlements import models as m
from tests.admission.test_snapshot_follows_writes import elsewhere  # noqa: F401 - the fixture
from tests.admission.test_snapshot_incremental import scope_of
from tests.admission.world import grant

R = 1000.0  # wt/s per CU of llama-test
POLLS = 3000  # × 10 ms: a bound for a loaded machine, not a speed requirement


def wait_for(held: Callable[[], bool]) -> bool:
    for _ in range(POLLS):
        if held():
            return True
        time.sleep(0.01)
    return False


def rate_held(key: tuple[str, ...]) -> float | None:
    snap = params._current
    sp = None if snap is None else snap.scopes.get(key)
    return None if sp is None else sp.rate


@pytest.fixture
def refresher(settings) -> Iterator[None]:
    settings.ADMISSION_SNAPSHOT_BACKGROUND = True
    settings.ADMISSION_SNAPSHOT_CHECK_S = 0.02
    yield
    params.stop_refresher()


@pytest.mark.django_db(transaction=True)
def test_a_write_elsewhere_reaches_the_held_snapshot_without_a_request(fleet, elsewhere, refresher):  # noqa: F811
    e = grant(fleet, fleet.pool_a, fleet.acme, "100", "reserved")
    key = scope_of(e)
    first = params.current()  # the first build, on this thread; it starts the refresher
    assert first.scopes[key].rate == 100 * R
    assert params._thread is not None and params._thread.is_alive()
    m.Entitlement.objects.filter(pk=e.pk).update(cu=Decimal("150"))  # committed, no signal
    assert wait_for(lambda: rate_held(key) == 150 * R)
    assert params._current is not None and params._current.version > first.version


@pytest.mark.django_db(transaction=True)
def test_the_refresher_wakes_at_a_window_boundary(fleet, elsewhere, settings):  # noqa: F811
    """No check falls due (an hour apart): only the boundary wakes the thread, which drops the
    scope whose entitlement ended."""
    settings.ADMISSION_SNAPSHOT_BACKGROUND = True
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600
    e = grant(fleet, fleet.pool_a, fleet.acme, "100", "reserved")
    key = scope_of(e)
    m.Entitlement.objects.filter(pk=e.pk).update(ends_at=timezone.now() + timedelta(seconds=1))
    first = params.current()
    try:
        assert first.scopes[key].rate == 100 * R
        assert wait_for(lambda: rate_held(key) is None)
    finally:
        params.stop_refresher()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_database_error_does_not_end_the_refresher(fleet, elsewhere, refresher, caplog):  # noqa: F811
    """The refresher's connection is killed by the server: that tick fails and is logged, the
    thread closes the connection, and the next write is picked up on a new one."""
    e = grant(fleet, fleet.pool_a, fleet.acme, "100", "reserved")
    key = scope_of(e)
    params.current()
    m.Entitlement.objects.filter(pk=e.pk).update(cu=Decimal("150"))
    assert wait_for(lambda: rate_held(key) == 150 * R)  # the refresher's connection is open
    with connection.cursor() as cur:
        # Only the refresher's: ending every other session would also end a connection another
        # context of this worker still holds (Playwright's greenlet keeps its own, issue 35 CI).
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [params.REFRESHER_APP_NAME],
        )
        assert cur.fetchone() == (1,)
    m.Entitlement.objects.filter(pk=e.pk).update(cu=Decimal("200"))
    assert wait_for(lambda: rate_held(key) == 200 * R)
    assert params._thread is not None and params._thread.is_alive()
    failed = [r for r in caplog.records if r.name == "admission.params" and r.levelno == logging.ERROR]
    assert len(failed) == 1, [r.getMessage() for r in failed]


@pytest.mark.django_db
def test_an_own_save_is_seen_by_the_next_call(fleet, settings):
    """Not committed (the test's transaction): only this thread's connection sees the save, and the
    refresher (no check due for an hour) is not what serves it."""
    settings.ADMISSION_SNAPSHOT_BACKGROUND = True
    settings.ADMISSION_SNAPSHOT_CHECK_S = 3600
    e = grant(fleet, fleet.pool_a, fleet.acme, "100", "reserved")
    key = scope_of(e)
    try:
        assert params.current().scopes[key].rate == 100 * R
        e.cu = Decimal("150")
        e.save()
        assert params.current().scopes[key].rate == 150 * R
    finally:
        params.stop_refresher()
