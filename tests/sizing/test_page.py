"""The calculator page: full render, the htmx results partial, inline errors, who may open it."""

from __future__ import annotations

import pytest
from django.test import Client

from telemetry.trace_import import trace_import
from tests.clients import web_client
from tests.figures import figures
from tests.sizing.test_traces import HEADER, ROWS, _csv

FORM = {
    "model": "llama-test",
    "accelerator": "",
    "arrival_rate_rps": "100",
    "lengths": "quantiles",
    "prompt_mean": "300",
    "prompt_p50": "300",
    "prompt_p95": "300",
    "prompt_p99": "300",
    "output_mean": "100",
    "output_p50": "100",
    "output_p95": "100",
    "output_p99": "100",
    "ttft_p99_s": "2",
    "tpot_p99_s": "0.2",
    "failure_policy": "zone",
    "zones": "3",
}
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def browser(people):
    return lambda who: web_client(people[who])


def test_the_htmx_partial_carries_results_steps_charts_and_the_point_used(catalogue, browser):
    r = browser("member").get("/sizing/", FORM, **HTMX)

    assert r.status_code == 200
    html = r.content.decode()
    assert "<form" not in html  # the partial alone
    assert '<div class="big" id="replicas-total">3</div>' in html
    assert "2,200 = 100 req/s × 22 s" in html
    assert {"kv-chart", "day-chart"} <= figures(html).keys()
    assert 'href="https://example.org/op"' in html
    assert '<small id="err-arrival_rate_rps" class="field-error" hx-swap-oob="true"></small>' in html


def test_a_bad_field_shows_its_error_inline_and_keeps_the_rest(catalogue, browser):
    r = browser("member").get("/sizing/", {**FORM, "arrival_rate_rps": "-5"}, **HTMX)

    html = r.content.decode()
    assert r.status_code == 200
    assert (
        '<small id="err-arrival_rate_rps" class="field-error" hx-swap-oob="true">must be 0 or 1e-06 to 100,000 requests/s (got -5.0)</small>'
        in html
    )
    assert '<small id="err-prompt_p50" class="field-error" hx-swap-oob="true"></small>' in html
    assert 'id="replicas-total"' not in html

    full = browser("member").get("/sizing/", {**FORM, "arrival_rate_rps": "-5"}).content.decode()
    assert (
        'id="err-arrival_rate_rps" class="field-error">must be 0 or 1e-06 to 100,000 requests/s (got -5.0)</small>'
        in full
    )
    assert 'name="prompt_p95" value="300"' in full


def test_an_slo_nobody_meets_is_shown_at_the_slo(catalogue, browser):
    html = browser("member").get("/sizing/", {**FORM, "ttft_p99_s": "0.1"}, **HTMX).content.decode()
    assert (
        '<small id="err-slo" class="field-error" hx-swap-oob="true">no measured operating point of llama-test' in html
    )


def test_the_trace_picker_lists_visible_traces_only_and_sizes_from_one(catalogue, browser, people):
    mine = trace_import(data=_csv([HEADER, *ROWS]), name="acme-trace", tenant=people["member"].membership.tenant)
    form = {**FORM, "lengths": "trace", "trace": str(mine.pk), "arrival_rate_rps": ""}

    html = browser("member").get("/sizing/", form, **HTMX).content.decode()
    assert "trace &#x27;acme-trace&#x27; (3 requests): prompt and output lengths paired by request" in html

    outsider = browser("outsider").get("/sizing/", form).content.decode()
    assert "acme-trace" not in outsider
    assert 'id="replicas-total"' not in outsider


def test_the_full_page_renders_with_defaults_for_people_and_not_for_gateways(catalogue, browser):
    r = browser("teammate").get("/sizing/")
    assert r.status_code == 200
    assert b'hx-trigger="input changed delay:300ms, change"' in r.content
    assert b'id="replicas-total"' in r.content
    assert browser("gateway").get("/sizing/").status_code == 404
    assert Client().get("/sizing/").status_code == 302


def test_the_workload_kind_chooses_the_catalogue_cv_shown_with_its_source(catalogue, browser):
    """Issue 45.3: the page's workload kind selects data/workload_cv.csv's minute-rate CV for a stated
    envelope, and the answer names the CV and where it was measured."""
    client = browser("member")
    page = client.get("/sizing/", FORM).content.decode()
    assert 'name="workload_kind"' in page and "coding: minute-rate CV 1.04" in page
    answers = {}
    for kind in ("conversation", "coding"):
        html = client.get("/sizing/", {**FORM, "workload_kind": kind}, **HTMX).content.decode()
        assert (
            f"Minute-rate CV {'0.21' if kind == 'conversation' else '1.04'}: the catalogue default for {kind}" in html
        )
        assert "public Azure LLM inference trace 2023" in html
        answers[kind] = float(html.split('id="cu-to-buy">')[1].split(" CU")[0])
    assert answers["coding"] > answers["conversation"]  # burstier minutes need more CU
    bad = client.get("/sizing/", {**FORM, "workload_kind": "poetry"}, **HTMX).content.decode()
    assert 'id="err-workload_kind"' in bad and "Select a valid choice" in bad
