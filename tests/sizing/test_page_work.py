"""The calculator computes each figure once per view (issue 35.4): the CU to buy (a replay of the whole
workload) for the class only, not for each of the day's hours and planning bases that read only the
fleet and its cost; and one KV replay per rate that changes it — a trace at its own timing replays the
same at every basis. Counted on the real functions."""

from __future__ import annotations

import pytest

import capacity.kv_replays as kv_replays
import capacity.sizing as sizing
from portal.forms import DEFAULT_DIURNAL
from telemetry.trace_import import trace_import
from tests.clients import web_client
from tests.sizing.test_page import FORM, HTMX
from tests.sizing.test_traces import HEADER, ROWS, _csv

# The day sizes its peak and each other distinct hourly rate of the default curve once.
DAY_RATES = len(set(DEFAULT_DIURNAL))


@pytest.fixture
def counted(monkeypatch):
    calls: dict[str, list[bool]] = {"planning_answer": [], "simulate_class": []}
    for name, module in (("planning_answer", sizing), ("simulate_class", kv_replays)):
        real = getattr(module, name)

        def spy(inp, *args, _real=real, _name=name):  # type: ignore[no-untyped-def]
            calls[_name].append(inp.arrival_times_s is not None)
            return _real(inp, *args)

        monkeypatch.setattr(module, name, spy)
    return calls


def test_a_view_from_quantiles_answers_the_cu_to_buy_once(catalogue, people, counted):
    r = web_client(people["member"]).get("/sizing/", FORM, **HTMX)
    assert r.status_code == 200 and "CU to buy" in r.content.decode()
    assert len(counted["planning_answer"]) == 1  # was 1 + the day's 19 hourly rates
    assert len(counted["simulate_class"]) == 1 + DAY_RATES  # the class, then each hourly rate (4,000 requests)


def test_a_view_from_a_trace_replays_its_kv_once_for_every_basis(catalogue, people, counted):
    member = people["member"]
    trace = trace_import(data=_csv([HEADER, *ROWS]), name="acme-trace", tenant=member.membership.tenant)
    form = {**FORM, "lengths": "trace", "trace": str(trace.pk), "arrival_rate_rps": ""}
    r = web_client(member).get("/sizing/", form, **HTMX)
    assert r.status_code == 200 and "peak_1m" in r.content.decode()
    assert counted["planning_answer"] == [True]  # was 1 + 3 other bases + the day's 19 rates
    # The trace's replay once (was once per basis: 4); the day sizes hourly rates without the times.
    assert counted["simulate_class"].count(True) == 1
    assert counted["simulate_class"].count(False) == DAY_RATES
