"""Schemathesis against /api/schema/ as each persona: no input, valid or not, gets a 5xx (issue 11.7).

Every operation of the schema, as operator, approver, requester, viewer and gateway, in positive
(schema-valid) and negative (schema-violating) generation, with a fixed number of examples and a
fixed seed (derandomized), through the real WSGI application on the demo fleet. A 5xx is collected
with the request that caused it, so one run lists them all. FUZZ_EXAMPLES raises the count for a
longer local hunt; the default keeps all five personas within the suite's 5-minute budget (the
time is printed per persona; it is not asserted, since a loaded machine would fail it, not the API).
"""

from __future__ import annotations

import os
import time
from io import StringIO

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from config.wsgi import application
from tests.admission.sinks import sink  # noqa: F401 - the events collector, a fixture

PERSONAS = {
    "operator": "demo-operator",
    "approver": "demo-approver",
    "requester": "demo-requester",
    "viewer": "demo-viewer",
    "gateway": "demo-gateway",
}
# ~50 s a persona on an idle 2-core machine (about 290 requests), so the five stay under 5 minutes.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "4"))


@pytest.fixture
def demo(db):
    call_command("load_demo", stdout=StringIO())


# The gateway persona's fuzzed reserves emit admission events. Sent to the process-wide buffer, its thread
# would ingest them on a connection of its own, committed past this test's rollback, and the ones ingest
# refuses would sit as dead letters in every later test of this worker (seen in CI): a collector takes them.
pytestmark = pytest.mark.usefixtures("sink")


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """Schemathesis calls the WSGI application directly, so Django's request signals run
    close_old_connections, which closes a connection inside the test's transaction on PostgreSQL
    (SQLite's in-memory database ignores it). Django's own test client disconnects it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _token(username: str) -> str:
    out = StringIO()
    call_command("create_api_token", username, "--name", "fuzz", stdout=out)
    return out.getvalue().strip()


def _describe(case, response) -> str:
    body = response.text[:300].replace("\n", " ")
    return f"{response.status_code} {case.method} {case.formatted_path} query={case.query} body={case.body!r:.300} → {body}"


@pytest.mark.fuzz
@pytest.mark.slow
@pytest.mark.parametrize("persona", list(PERSONAS))
def test_no_operation_answers_5xx(demo, persona):
    headers = {"Authorization": f"Token {_token(PERSONAS[persona])}"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application, headers=headers)
    failures: list[str] = []
    calls = 0
    in_calls = [0.0]
    began = time.monotonic()
    for result in schema.get_all_operations():
        operation = result.ok()
        # Negative cases for a body: making a path or query parameter invalid mostly costs
        # generation time (seconds per operation) to reach a 404 or a 400 that no code path differs on.
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if operation.body else [])
        for mode in modes:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def call(case):
                nonlocal calls
                calls += 1
                t_call = time.monotonic()
                response = case.call(headers=headers)
                in_calls[0] += time.monotonic() - t_call
                if response.status_code >= 500:
                    failures.append(_describe(case, response))

            t_op = time.monotonic()
            try:
                call()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing in this operation can be made invalid
            if os.environ.get("FUZZ_TIMES"):
                print(f"{time.monotonic() - t_op:6.2f} s {mode.value} {operation.label}")
    took = time.monotonic() - began
    print(f"{persona}: {calls} requests in {took:.1f} s ({in_calls[0]:.1f} s answering), {len(failures)} 5xx")
    assert failures == []
    assert calls >= 50  # every operation was reached, not skipped
