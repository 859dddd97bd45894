"""A statement reads rollups, never raw events, with a fixed number of queries whatever the traffic."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry.statement import statement
from tests.telemetry.helpers import T0


@pytest.mark.django_db
def test_no_raw_event_is_read_and_queries_are_few(known):
    with CaptureQueriesContext(connection) as ctx:
        started = time.perf_counter()
        statement(known, T0, T0 + timedelta(hours=2))
        elapsed = time.perf_counter() - started
    sql = [q["sql"].lower() for q in ctx.captured_queries]
    assert not [q for q in sql if "telemetry_admissionevent" in q]
    # history, 3 rollup pieces, per-minute use, pool price lookups: no query per event or per minute
    assert len(sql) <= 10, sql
    print(f"statement: {len(sql)} queries, {elapsed * 1000:.1f} ms")
