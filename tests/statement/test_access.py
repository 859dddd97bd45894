"""Who reads a statement (page, API, CSV): the tenant's members, approvers, operators; 404 for the rest."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest

from tests.clients import api_client, web_client
from tests.factories import member, platform_user
from tests.telemetry.helpers import T0

PERIOD = {"start": T0.isoformat(), "end": (T0 + timedelta(hours=2)).isoformat()}


def _urls(ent) -> dict[str, str]:
    return {
        "page": f"/entitlements/{ent.uuid}/statement/",
        "csv": f"/entitlements/{ent.uuid}/statement.csv",
        "api": f"/api/v1/entitlements/{ent.uuid}/statement",
    }


@pytest.fixture
def people(fleet):
    return {
        "viewer": member("viewer", fleet.acme, "viewer"),
        "requester": member("requester", fleet.acme, "requester"),
        "approver": platform_user("approver", "approver"),
        "operator": fleet.operator,
        "outsider": member("outsider", fleet.globex, "requester"),
        "gateway": platform_user("gateway", "gateway"),
    }


def _get(user, kind: str, url: str, params: dict):
    client = api_client(user) if kind == "api" else web_client(user)
    return client.get(url, params)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["page", "csv", "api"])
@pytest.mark.parametrize(
    ("who", "code"),
    [("viewer", 200), ("requester", 200), ("approver", 200), ("operator", 200), ("outsider", 404), ("gateway", 404)],
)
def test_who_reads_a_statement(known, people, kind, who, code):
    r = _get(people[who], kind, _urls(known)[kind], PERIOD)
    assert r.status_code == code
    if code == 404:  # nothing of the statement leaks into the answer
        assert b"132000" not in r.content and str(known.uuid).encode() not in r.content


@pytest.mark.django_db
def test_the_three_answers_carry_the_same_figures(known, people):
    urls = _urls(known)
    data = _get(people["viewer"], "api", urls["api"], PERIOD).json()
    assert data["used"]["wt"] == 132_000 and data["requests"]["attempted"] == 15
    table = dict(csv.reader(io.StringIO(_get(people["viewer"], "csv", urls["csv"], PERIOD).content.decode())))
    assert table["used.wt"] == "132000.0"
    assert table["requests.throttled.by_reason.OUTSIDE_ENVELOPE"] == "2"
    assert table["latency.attainment"] == "0.75"
    assert table["cost.usd"] == "1.14"
    page = _get(people["viewer"], "page", urls["page"], PERIOD).content.decode()
    assert 'id="latency-promise"' in page and "3 of 4" in page
    assert 'id="envelope"' in page and "960.0" in page


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["page", "csv", "api"])
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "yesterday"}, "start"),
        ({"end": "2026-01-01T00:00:00"}, "end"),  # no zone
        ({"start": "2026-02-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "end"),
        ({"start": "2024-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "start"),  # over 400 days
    ],
)
def test_a_bad_period_is_a_400_naming_the_field(known, people, kind, params, field):
    r = _get(people["viewer"], kind, _urls(known)[kind], params)
    assert r.status_code == 400
    named = list(r.json()["error"]["fields"]) if kind == "api" else [r.content.decode().split(":")[0]]
    assert named == [field]


@pytest.mark.django_db
def test_the_entitlement_page_links_its_statement(known, people):
    page = web_client(people["viewer"]).get(f"/entitlements/{known.uuid}/").content.decode()
    assert f'href="/entitlements/{known.uuid}/statement/"' in page
