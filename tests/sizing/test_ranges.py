"""Issue 11.4 through the web: every sizing number has a documented range; outside it, a 400 naming
the field (API) or an error beside the field (calculator); docs/input-ranges.md lists the same ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from capacity.ranges import RANGES, range_table
from tests.clients import web_client
from tests.sizing.conftest import sizing_body
from tests.sizing.test_page import FORM, HTMX

URL = "/api/v1/sizing"
RANGES_DOC = Path(__file__).resolve().parents[2] / "docs" / "input-ranges.md"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"arrival_rate_rps": 1e9}, "arrival_rate_rps"),
        ({"arrival_rate_rps": 1e-320}, "arrival_rate_rps"),
        ({"utilization_target": 1e-320}, "utilization_target"),
        ({"lb_unevenness": 1e6}, "lb_unevenness"),
        ({"startup_minutes": 1e12}, "startup_minutes"),
        ({"ramp_rps_per_minute": 1e12}, "ramp_rps_per_minute"),
        ({"zones": 100_000}, "zones"),
        ({"failure_policy": "replica:99999999"}, "failure_policy"),
        ({"slo": {"ttft_p99_s": 1e-320, "tpot_p99_s": 0.2}}, "slo.ttft_p99_s"),
        ({"slo": {"ttft_p99_s": 2, "tpot_p99_s": 1e9}}, "slo.tpot_p99_s"),
        ({"prompt_tokens": {"mean": 1e300, "p50": 1, "p95": 2, "p99": 3}}, "prompt_tokens.mean"),
        ({"output_tokens": {"mean": 5, "p50": 1e-320, "p95": 2, "p99": 3}}, "output_tokens.p50"),
        ({"prompt_tokens": {"samples": [1, 2, 10**12]}}, "prompt_tokens.samples"),
        ({"cost": {"pue": 1e300}}, "cost.pue"),
        ({"cost": {"slo_met_fraction": 1e-320}}, "cost.slo_met_fraction"),
    ],
)
def test_the_api_answers_400_naming_the_field_outside_its_range(catalogue, api, body, field):
    r = api("member").post(URL, sizing_body(**body), format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()["error"]["fields"]) == [field]


def test_the_calculator_shows_the_range_beside_the_field(catalogue, people):
    r = web_client(people["member"]).get("/sizing/", {**FORM, "arrival_rate_rps": "1e9"}, **HTMX)
    assert r.status_code == 200
    assert RANGES["arrival_rate_rps"].describe() in r.content.decode()


def test_the_ranges_doc_lists_every_range():
    text = RANGES_DOC.read_text()
    for field, described in range_table():
        assert f"| `{field}` | {described} |" in text, field
