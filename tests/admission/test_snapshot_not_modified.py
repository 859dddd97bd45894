"""Issue 35.1: a gateway's poll naming the current ETag is answered 304 from the change counters
(admission.snapshot_stamp), without building the snapshot; a write, or a window boundary passing,
makes the next poll build and answer 200 with the new version. The tests with writes commit them
(`transactional_db`): PostgreSQL's triggers bump the counters when the writer commits."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from admission import snapshot_triggers
from entitlements.api import snapshot as gateway_snapshot
from tests.admission.world import client_for
from tests.factories import grant_kwargs

URL = "/api/v1/entitlements/snapshot"
# What a build reads: the entitlement and pool rows (entitlements.selectors), the scopes' sums.
BUILD_TABLES = ("entitlements_entitlement", "entitlements_pool")
COUNTER_READ = f"FROM {snapshot_triggers.COUNTERS} WHERE id = 1"


@pytest.fixture(autouse=True)
def _no_memo():
    gateway_snapshot.forget()  # a version remembered by an earlier test's build
    yield
    gateway_snapshot.forget()


def _grant(fleet, cu="1", **kw):
    from entitlements.services import entitlement_grant

    return entitlement_grant(actor=fleet.operator, reason="t", **grant_kwargs(fleet.pool_a, fleet.acme, cu, **kw))


def _warm(fleet):
    _grant(fleet)
    client = client_for("gw", "gateway")
    first = client.get(URL)
    assert first.status_code == 200
    client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])  # the token and the serving snapshot warm
    return client, first


def test_a_poll_with_the_current_etag_builds_nothing(fleet):
    client, first = _warm(fleet)
    with CaptureQueriesContext(connection) as q:
        again = client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert again["ETag"] == first["ETag"]
    built = [x["sql"] for x in q.captured_queries if any(t in x["sql"] for t in BUILD_TABLES)]
    assert built == []


def test_the_304_costs_the_counter_read_alone(fleet):
    """Exact: the gateway token's checks (three reads, the same on every request), then one read of
    the counters; nothing else."""
    client, first = _warm(fleet)
    with CaptureQueriesContext(connection) as q:
        again = client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    sqls = [x["sql"] for x in q.captured_queries]
    assert [re.search(r'FROM "?(\w+)', s).group(1) for s in sqls] == [
        "entitlements_apitoken",
        "entitlements_platformrole",
        "entitlements_membership",
        snapshot_triggers.COUNTERS,
    ]
    assert COUNTER_READ in sqls[-1]


def test_another_etag_is_answered_200_with_the_current_one(fleet):
    client, first = _warm(fleet)
    other = client.get(URL, HTTP_IF_NONE_MATCH='"0123"')
    assert other.status_code == 200
    assert other["ETag"] == first["ETag"]


@pytest.mark.parametrize("write", ["grant", "cu", "revoke", "pool"])
def test_a_write_between_polls_gives_200_and_a_new_version(transactional_db, fleet, write, settings):
    from entitlements.models import Entitlement, Pool
    from entitlements.services import entitlement_amend, entitlement_revoke

    # The serving snapshot reads the counters on every use here: at the default 0.25 s a write with no
    # signal (`pool`) could be taken in between the two polls on a loaded machine, so the first poll
    # built with the old admission block and the second, rightly, with the new one (a 200, not a 304).
    settings.ADMISSION_SNAPSHOT_CHECK_S = 0
    client, first = _warm(fleet)
    e = Entitlement.objects.get()
    if write == "grant":
        _grant(fleet, "2")
    elif write == "cu":
        entitlement_amend(actor=fleet.operator, entitlement=e, reason="t", cu="3")
    elif write == "revoke":
        entitlement_revoke(actor=fleet.operator, entitlement=e, reason="t")
    else:
        Pool.objects.filter(pk=fleet.pool_a.pk).update(maintenance_pct=40)  # no signal: the trigger counts it
    after = client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert after.status_code == 200
    assert after["ETag"] != first["ETag"]
    assert after["ETag"] == f'"{after.json()["version"]}"'
    assert client.get(URL, HTTP_IF_NONE_MATCH=after["ETag"]).status_code == 304


def test_a_window_starting_rebuilds(fleet, monkeypatch):
    """An entitlement that starts in 10 s: no write happens, yet past its start the poll builds and
    the entitlement is in the snapshot (the clocks are moved, not waited for)."""
    start = timezone.now() + timedelta(seconds=10)
    later = _grant(fleet, "2", start=start)
    client, first = _warm(fleet)
    assert str(later.uuid) not in {e["uuid"] for e in first.json()["entitlements"]}
    assert client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304

    wall, mono = timezone.now, time.monotonic
    monkeypatch.setattr(timezone, "now", lambda: wall() + timedelta(seconds=11))
    monkeypatch.setattr(time, "monotonic", lambda: mono() + 11)
    after = client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert after.status_code == 200
    assert str(later.uuid) in {e["uuid"] for e in after.json()["entitlements"]}


def test_a_build_while_the_serving_snapshot_lags_is_not_remembered(transactional_db, fleet, monkeypatch):
    """A write the serving snapshot has not read yet (another process's: no signal here, and its
    next counter check not due) builds an "admission" block older than the counters; that build
    must not be remembered, or once the serving snapshot catches up the poll would still get 304."""
    from admission import params
    from entitlements.models import Pool

    client, first = _warm(fleet)
    monkeypatch.setattr(params, "_next_check", float("inf"))
    Pool.objects.filter(pk=fleet.pool_a.pk).update(maintenance_pct=40)
    lagging = client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert lagging.status_code == 200
    assert lagging.json()["admission"] == first.json()["admission"]  # the serving snapshot's, not yet re-read

    monkeypatch.setattr(params, "_next_check", 0.0)  # its check is due: it reads the counters
    caught_up = client.get(URL, HTTP_IF_NONE_MATCH=lagging["ETag"])
    assert caught_up.status_code == 200
    assert caught_up.json()["admission"]["pools"] != first.json()["admission"]["pools"]
    assert client.get(URL, HTTP_IF_NONE_MATCH=caught_up["ETag"]).status_code == 304


def test_no_build_is_trusted_past_the_serving_snapshots_ttl(fleet, monkeypatch, settings):
    """Health ages with no write the serving path sees before its ADMISSION_SNAPSHOT_TTL_S rebuild:
    past that (no window boundary nearer) the poll builds again; same content, so still 304."""
    client, first = _warm(fleet)
    mono = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: mono() + settings.ADMISSION_SNAPSHOT_TTL_S + 1)
    with CaptureQueriesContext(connection) as q:
        again = client.get(URL, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    pool_reads = [x["sql"] for x in q.captured_queries if 'ORDER BY "entitlements_pool"."slug"' in x["sql"]]
    assert len(pool_reads) == 1  # snapshot_pool_rows: the build's
