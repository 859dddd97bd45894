"""Issue 15.2 properties through POST /api/v1/sizing, on a catalogue of four shapes over two
accelerator types priced alike ($2/h per accelerator, so cost and accelerators rank alike):
a looser SLO never costs more; more demand never costs less nor uses fewer accelerators; the
chosen point is the cheapest feasible one, and the alternatives are exactly the other feasible
points, each costed as if it were the only one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capacity.operating_points import Slo, meets_slo
from capacity.sizing import size
from entitlements.sizing_specs import point_spec
from sizing.parsing import prepare_sizing
from tests.factories import AcceleratorFactory, OperatingPointFactory, ServedModelFactory
from tests.sizing.conftest import sizing_body

URL = "/api/v1/sizing"
PROPS = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
# (accelerator, per replica, out tok/s, TTFT limit ms, TPOT limit ms)
SHAPES = [
    ("gpu-a", 8, 10_000, 2000, 200),
    ("gpu-a", 1, 1_500, 500, 100),
    ("gpu-b", 2, 3_500, 1000, 150),
    ("gpu-b", 4, 6_000, 300, 50),
]


@pytest.fixture
def shapes(db):
    model = ServedModelFactory(weights_gb=14.0, context_length=32_768)
    rows = []
    for slug, apr, tps, ttft, tpot in SHAPES:
        acc = AcceleratorFactory(slug=slug, name=slug, cloud_on_demand_per_hour=2.0)
        rows.append(
            OperatingPointFactory(
                model=model,
                accelerator=acc,
                accelerators_per_replica=apr,
                out_tps_per_replica=tps,
                ttft_p99_limit_ms=ttft,
                tpot_p99_limit_ms=tpot,
            )
        )
    return rows


def _body(rate: float, ttft: float, tpot: float) -> dict:
    return sizing_body(arrival_rate_rps=rate, slo={"ttft_p99_s": ttft, "tpot_p99_s": tpot}, failure_policy="none")


def _post(api, body):
    r = api("member").post(URL, body, format="json")
    return r.status_code, r.json()


slos = st.tuples(st.sampled_from([0.3, 0.5, 1.0, 2.0]), st.sampled_from([0.05, 0.1, 0.15, 0.2]))


@PROPS
@given(rate=st.floats(0.1, 300), slo=slos, looser=st.tuples(st.floats(1, 8), st.floats(1, 4)))
def test_a_looser_slo_never_costs_more(shapes, api, rate, slo, looser):
    status, tight = _post(api, _body(rate, *slo))
    if status == 400:
        assert list(tight["error"]["fields"]) == ["slo"]
        return
    _, loose = _post(api, _body(rate, slo[0] * looser[0], slo[1] * looser[1]))
    assert loose["cost"]["per_hour"] <= tight["cost"]["per_hour"]


@PROPS
@given(rate=st.floats(0.1, 300), factor=st.floats(1, 20), slo=slos)
def test_more_demand_never_costs_less_or_uses_fewer_accelerators(shapes, api, rate, factor, slo):
    status, small = _post(api, _body(rate, *slo))
    if status == 400:
        return
    _, big = _post(api, _body(rate * factor, *slo))
    assert big["cost"]["per_hour"] >= small["cost"]["per_hour"]
    assert big["accelerators"] >= small["accelerators"]


@PROPS
@given(rate=st.floats(0.1, 300), slo=slos)
def test_the_chosen_point_is_the_cheapest_feasible_one_of_the_catalogue(shapes, api, people, rate, slo):
    status, d = _post(api, _body(rate, *slo))
    feasible = {point_spec(r).label for r in shapes if meets_slo(point_spec(r), Slo(*slo))}
    if status == 400:
        assert not feasible
        return
    chosen = d["operating_point_used"]["label"]
    assert {chosen, *(a["label"] for a in d["alternatives"])} == feasible
    # Each point sized alone (same inputs, one point) costs what the answer says it costs.
    prepared = prepare_sizing(_body(rate, *slo), people["member"])
    alone = {
        p.label: size(replace(prepared.inp, operating_points=(p,)))
        for p in prepared.inp.operating_points
        if p.label in feasible
    }
    costs = {label: alone[label].cost.per_hour.value for label in feasible}
    assert d["cost"]["per_hour"] == costs[chosen] == min(costs.values())
    for a in d["alternatives"]:
        assert a["cost_per_hour"] == costs[a["label"]]


def test_the_calculator_says_why_the_winner_won_and_lists_the_runners_up(shapes, people):
    from tests.clients import web_client
    from tests.sizing.test_page import FORM, HTMX

    form = {**FORM, "failure_policy": "none", "zones": "1", "arrival_rate_rps": "1", "ttft_p99_s": "2"}
    html = web_client(people["member"]).get("/sizing/", form, **HTMX).content.decode()
    assert "<strong>Why this one:</strong> operating point llama-test on 1× gpu-a" in html
    assert html.count("<tr><td>llama-test on") == 3  # every other shape meets TTFT 2 s and TPOT 0.2 s
