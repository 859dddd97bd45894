"""Alertmanager's receiver writes a post in bulk (issue 29.3): a group of 5,000 alerts is one post of a
bounded number of queries (was a transaction and a SELECT … FOR UPDATE per alert: worker timeout, and
Alertmanager retried the same post), and impossible times are refused naming the field."""

from __future__ import annotations

import pytest

from telemetry.models import PoolAlert
from tests.telemetry.helpers import client_for, person
from tests.telemetry.test_alertmanager import alert, hook

URL = "/api/v1/telemetry/alertmanager"
N = 5000
# auth, the pool lookup, 3 chunked locking reads, 10 insert batches or 10 update batches, savepoints
MAX_QUERIES = 30


def _post(client, body):
    return client.post(URL, body, content_type="application/json")


@pytest.mark.postgres
def test_5000_alerts_in_one_post_are_a_bounded_number_of_queries(fleet, django_assert_max_num_queries):
    gw = client_for(person("gw", platform="gateway"))
    firing = hook(*(alert(fp=f"fp{i}", instance=f"10.0.{i // 250}.{i % 250}:8000") for i in range(N)))
    _post(gw, hook(alert(fp="warm")))  # the token is verified once, as on a live receiver
    with django_assert_max_num_queries(MAX_QUERIES):
        r = _post(gw, firing)
    assert r.status_code == 200 and r.json()["accepted"] == N and r.json()["errors"] == []
    with django_assert_max_num_queries(MAX_QUERIES):
        r = _post(gw, firing)  # Alertmanager's retry of the same post
    assert (r.json()["accepted"], r.json()["unchanged"]) == (0, N)
    resolved = hook(*(dict(a, status="resolved", endsAt="2026-11-30T12:05:00Z") for a in firing["alerts"]))
    with django_assert_max_num_queries(MAX_QUERIES):
        r = _post(gw, resolved)
    assert r.json()["accepted"] == N
    assert PoolAlert.objects.filter(state="resolved").count() == N == PoolAlert.objects.count() - 1


def test_one_post_applies_its_alerts_in_order(fleet):
    """As one by one: created, changed, resolved, then a late firing copy that must not reopen it."""
    gw = client_for(person("gw", platform="gateway"))
    changed = alert(fp="a", annotations={"summary": "changed"})
    resolved = dict(alert(fp="a"), status="resolved", endsAt="2026-11-30T12:05:00Z")
    r = _post(gw, hook(alert(fp="a"), changed, resolved, changed))
    assert (r.json()["accepted"], r.json()["unchanged"]) == (3, 1)
    (row,) = PoolAlert.objects.all()
    assert (row.state, row.annotations) == ("resolved", {"summary": "ServiceDown on 10.0.0.1:8000"})
    r = _post(gw, hook(changed))
    assert (r.json()["accepted"], r.json()["unchanged"]) == (0, 1)


@pytest.mark.parametrize(
    ("kw", "field", "message"),
    [
        ({"startsAt": "9999-12-31T00:00:00Z"}, "startsAt", "in the future (at most 300 s ahead)"),
        ({"status": "resolved", "endsAt": "2026-11-30T11:00:00Z"}, "endsAt", "before startsAt"),
        ({"endsAt": "2026-11-30T11:00:00Z"}, "endsAt", "before startsAt"),
        ({"status": "resolved", "endsAt": "9999-12-31T00:00:00Z"}, "endsAt", "in the future (at most 300 s ahead)"),
    ],
)
def test_impossible_times_are_refused_naming_the_field(fleet, kw, field, message):
    gw = client_for(person("gw", platform="gateway"))
    r = _post(gw, hook(alert(fp="good"), alert(fp="bad", **kw)))
    assert r.json()["errors"] == [{"index": 1, "field": field, "message": message}]
    assert list(PoolAlert.objects.values_list("fingerprint", flat=True)) == ["good"]
