"""A JSON body over DATA_UPLOAD_MAX_MEMORY_SIZE is a JSON 400 naming the limit (issue 29), and the
documented batch (TELEMETRY_MAX_BATCH events) fits under it."""

from __future__ import annotations

import json

from django.conf import settings
from django.test import override_settings

from telemetry.models import AdmissionEvent
from tests.telemetry.helpers import client_for, event, person


def test_an_oversized_body_is_a_json_400_naming_the_limit_and_nothing_is_stored(fleet):
    gw = client_for(person("gw", platform="gateway"))
    body = json.dumps({"source": "gw-1", "events": [event(i) for i in range(40)]})
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(body) - 1):
        r = gw.post("/api/v1/telemetry/events", body, content_type="application/json")
    assert r.status_code == 400 and r["Content-Type"] == "application/json"
    err = r.json()["error"]
    assert err["code"] == "too_large"
    assert err["fields"]["body"] == [
        f"{len(body):,} bytes is over the limit of {len(body) - 1:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); "
        "send it in smaller batches"
    ]
    assert AdmissionEvent.objects.count() == 0
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(body)):
        ok = gw.post("/api/v1/telemetry/events", body, content_type="application/json")
    assert ok.status_code == 200 and ok.json()["accepted"] == 40


def test_the_documented_batch_fits_under_the_body_limit():
    # A full complete event, as a gateway sends it: every optional field set.
    one = json.dumps(
        event(
            123456,
            event_id="0f9c2d4e-8b1a-4c3d-9e7f-1a2b3c4d5e6f",
            tenant="acme-production",
            project="checkout-assistant",
            decision="complete",
            estimated_wt=123456.5,
            prompt_tokens=12345,
            cached_prompt_tokens=1234,
            output_tokens=2345,
            ttft_ms=1234.5,
            e2e_ms=23456.7,
            slo_met=True,
        )
    )
    full = len(one) * settings.TELEMETRY_MAX_BATCH + len('{"source": "gateway-eu-west-1", "events": []}')
    assert full < settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_pages_keep_their_own_400_page():
    # Only /api/ answers JSON; a person's form post over the limit still gets the portal's page.
    from django.test import Client

    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10):
        r = Client().post("/login/", "x" * 100, content_type="text/plain")
    assert r["Content-Type"].startswith("text/html")
