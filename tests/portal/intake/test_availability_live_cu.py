"""The launch form's live availability takes the committed CU the live sizing already shows (issue 52):
sizing replays 64 simulated draws per scenario, so the rows must not size again for the same inputs; for
other inputs (the sizing has not caught up, or a figure posted for something else) they size themselves.

Calls to the sizing are counted by wrapping the real portal.selectors.size_request (it still runs)."""

from __future__ import annotations

import re

import pytest

from portal.views import intake_availability
from tests.portal.intake.test_availability import _form, sell

pytestmark = pytest.mark.django_db


@pytest.fixture
def sizing_calls(monkeypatch):
    calls = []
    real = intake_availability.size_request

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(intake_availability, "size_request", counted)
    return calls


def _sized(html: str) -> dict[str, str]:
    """The figure the sizing fragment carries for the availability (#sized's hidden inputs)."""
    block = html.split('id="sized"')[1].split("</span>")[0]
    return dict(re.findall(r'name="(sized_\w+)" value="([^"]*)"', block))


def _rows(html: str) -> list[str]:
    return re.findall(r"<tr data-pool=.*?</tr>", html, flags=re.S)


def test_the_rows_take_the_sized_cu_and_do_not_size_again(fleet, people, draft, eu_pool, sizing_calls):
    from tests.clients import web_client

    sell(fleet.pool_a, fleet.globex, 270)
    c = web_client(people.requester)
    form = _form(fleet)
    resp = c.post(f"/launch/{draft.uuid}/sizing", form, HTTP_HX_REQUEST="true")
    assert resp.status_code == 200 and resp["HX-Trigger-After-Settle"] == "sized"
    sized = _sized(resp.content.decode())
    assert sized["sized_cu"] == "28.300"  # the committed CU shown (conftest's envelope)

    reused = c.post("/launch/availability", {**form, **sized}, HTTP_HX_REQUEST="true").content.decode()
    assert sizing_calls == []  # no second sizing for the same inputs
    again = c.post("/launch/availability", form, HTTP_HX_REQUEST="true").content.decode()
    assert len(sizing_calls) == 1  # without the figure it sizes, once
    assert "28.300 CU" in reused and _rows(reused) == _rows(again) and len(_rows(reused)) == 3
    assert "best-mark" in reused.split('data-pool="pool-b"')[1].split("</tr>")[0]


def test_a_figure_sized_for_other_inputs_is_not_taken(fleet, people, draft, sizing_calls):
    from tests.clients import web_client

    c = web_client(people.requester)
    form = _form(fleet)
    sized = _sized(c.post(f"/launch/{draft.uuid}/sizing", form, HTTP_HX_REQUEST="true").content.decode())
    # Typed since: the committed rate doubled; the sizing has not answered yet, so the figure is stale.
    typed = {**form, "committed_value": str(float(form["committed_value"]) * 2)}
    html = c.post("/launch/availability", {**typed, **sized}, HTTP_HX_REQUEST="true").content.decode()
    assert len(sizing_calls) == 1
    assert "28.300 CU" not in html and "(the committed CU)" in html
    # A figure with no key, or a key with a figure that is not a number, is not taken either.
    for bad in ({"sized_cu": "999"}, {**sized, "sized_cu": "NaN"}, {**sized, "sized_cu": "x"}):
        c.post("/launch/availability", {**form, **bad}, HTTP_HX_REQUEST="true")
    assert len(sizing_calls) == 4


def test_the_edit_page_carries_the_figure_it_shows(fleet, people, draft, sizing_calls):
    from tests.clients import web_client

    c = web_client(people.requester)
    html = c.get(f"/launch/{draft.uuid}/edit").content.decode()
    sized = _sized(html)
    assert sized["sized_cu"] == "28.300" and len(sized["sized_for"]) == 32
    # The rows' first read (on load) posts the form as drawn: the saved request's figure is taken.
    calls = len(sizing_calls)
    rows = c.post("/launch/availability", {**_form(fleet), **sized}, HTTP_HX_REQUEST="true").content.decode()
    assert len(sizing_calls) == calls and "28.300 CU" in rows
    # The rows follow the sizing's answers on a saved draft, not each keystroke.
    section = html.split('id="availability"')[1].split(">")[0]
    assert 'hx-include="#lr-form, #sized"' in section and "sized from:body" in section and "input" not in section
