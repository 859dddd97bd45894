"""A trace uploaded from the calculator page (issue 22): stored for the uploader's tenant, the calculator
opens on it in trace mode; a bad file is a 400 naming the line and field, and nothing is stored."""

from django.core.files.uploadedfile import SimpleUploadedFile

from telemetry.models import Trace
from tests.clients import web_client

GOOD = b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + b"".join(
    f"2023-11-16 18:15:{s:02d}.0000000,{400 + s},{100 + s}\n".encode() for s in range(40)
)


def test_upload_stores_the_trace_and_opens_trace_mode(people):
    c = web_client(people["teammate"])
    resp = c.post("/sizing/traces/", {"name": "our chat", "file": SimpleUploadedFile("t.csv", GOOD)})
    trace = Trace.objects.get(name="our chat")
    assert resp.status_code == 302 and resp["Location"] == f"/sizing/?lengths=trace&trace={trace.pk}"
    assert trace.tenant.slug == "acme" and trace.requests == 40
    page = c.get(resp["Location"]).content.decode()
    assert f'<option value="{trace.pk}" selected>our chat (40 requests)' in page


def test_a_bad_file_names_what_is_wrong_and_stores_nothing(people):
    c = web_client(people["teammate"])
    bad = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:01.0000000,abc,10\n"
    resp = c.post("/sizing/traces/", {"name": "broken", "file": SimpleUploadedFile("t.csv", bad)})
    assert resp.status_code == 400
    body = resp.content.decode()
    assert 'id="upload-error"' in body and "line 2" in body
    assert not Trace.objects.filter(name="broken").exists()
    resp = c.post("/sizing/traces/", {"name": "", "file": SimpleUploadedFile("t.csv", GOOD)})
    assert resp.status_code == 400 and "name: give the trace a name" in resp.content.decode()
