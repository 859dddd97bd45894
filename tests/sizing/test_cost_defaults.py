"""One source for the cost defaults: the calculator page's first values and the API's defaults for a
request without `cost` both come from the COST_* settings (through CostOptions)."""

from __future__ import annotations

import pytest

from tests.clients import web_client
from tests.sizing.conftest import sizing_body
from tests.sizing.test_page import FORM


@pytest.fixture
def costs(settings):
    settings.COST_PUE, settings.COST_ELECTRICITY_PER_KWH, settings.COST_NETWORK_PER_GB = 1.7, 0.2, 0.03
    return {"pricing": "on_demand", "pue": 1.7, "electricity_per_kwh": 0.2, "network_per_gb": 0.03}


def test_the_page_starts_from_the_settings(catalogue, people, costs):
    r = web_client(people["member"]).get("/sizing/", FORM)
    data = r.context["form"].data
    assert {k: data[k] for k in costs} == costs


def test_the_api_without_cost_uses_the_same_settings(catalogue, api, costs):
    omitted = api("member").post("/api/v1/sizing", sizing_body(), format="json")
    given = api("member").post("/api/v1/sizing", sizing_body(cost=costs), format="json")
    other = api("member").post("/api/v1/sizing", sizing_body(cost={**costs, "pue": 1.0}), format="json")
    assert omitted.status_code == given.status_code == other.status_code == 200
    assert omitted.json()["cost"] == given.json()["cost"]
    assert omitted.json()["cost"] != other.json()["cost"]
