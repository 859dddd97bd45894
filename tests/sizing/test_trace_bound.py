"""The trace-upload bound (TRACE_MAX_BYTES, 64 MB by default) at both doors, the API and the calculator page:
a file one byte over is refused naming `file` and nothing is stored; a file of exactly the bound is taken.
The bound is lowered to the test file's size, so each door's own check is what refuses (taking either check
out fails its test)."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from telemetry.models import Trace
from tests.clients import web_client

CSV = b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + b"".join(
    f"2023-11-16 18:15:{s:02d}.0000000,{400 + s},{100 + s}\n".encode() for s in range(40)
)


def _api_upload(client, name: str):
    return client.post("/api/v1/traces", {"file": SimpleUploadedFile(name, CSV, content_type="text/csv")},
                       format="multipart")  # fmt: skip


def test_the_api_refuses_a_file_one_byte_over_the_bound_and_takes_one_at_it(api, people, settings):
    settings.TRACE_MAX_BYTES = len(CSV) - 1
    r = _api_upload(api("member"), "over.csv")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"file": [f"larger than {len(CSV) - 1:,} bytes"]}
    assert not Trace.objects.exists()

    settings.TRACE_MAX_BYTES = len(CSV)
    r = _api_upload(api("member"), "at.csv")
    assert r.status_code == 201, r.content
    assert Trace.objects.get().requests == 40


def test_the_page_refuses_a_file_one_byte_over_the_bound_and_takes_one_at_it(people, settings):
    c = web_client(people["teammate"])
    settings.TRACE_MAX_BYTES = len(CSV) - 1
    resp = c.post("/sizing/traces/", {"name": "over", "file": SimpleUploadedFile("t.csv", CSV)})
    assert resp.status_code == 400
    assert f"file: at most {len(CSV) - 1:,} bytes" in resp.content.decode()
    assert not Trace.objects.exists()

    settings.TRACE_MAX_BYTES = len(CSV)
    resp = c.post("/sizing/traces/", {"name": "at", "file": SimpleUploadedFile("t.csv", CSV)})
    assert resp.status_code == 302
    assert Trace.objects.get().name == "at"
