"""Trace import (command and API), all or nothing, CRLF or LF, and who may see a trace."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from telemetry.models import Trace
from telemetry.trace_import import trace_import
from tests.sizing.conftest import sizing_body

AZURE = settings.DATA_DIR / "azure_llm_2023_conv.csv"
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
ROWS = [
    "2023-11-16 18:15:46.6805900,374,44",
    "2023-11-16 18:15:50.9951690,396,109",
    "2023-11-16 18:16:06.2760000,879,52",
]
BAD = [HEADER, ROWS[0], "2023-11-16 18:15:47.0000000,abc,12", ROWS[1], "2023-11-16 18:15:48.0000000,10", ROWS[2]]


def _csv(lines: list[str], newline: str = "\n") -> bytes:
    return (newline.join(lines) + newline).encode()


def _upload(client, data: bytes, name: str = "t.csv"):
    return client.post(
        "/api/v1/traces", {"file": SimpleUploadedFile(name, data, content_type="text/csv")}, format="multipart"
    )


@pytest.mark.django_db
def test_the_command_imports_the_azure_trace_and_prints_its_characterisation():
    out = StringIO()
    call_command("import_trace", str(AZURE), "--name", "azure conv", stdout=out)

    first, rest = out.getvalue().split("\n", 1)
    stats = json.loads(rest)
    assert stats["requests"] == 19366
    assert stats["prompt"]["p50"] == 1020
    assert stats["output"]["p50"] == 129
    trace = Trace.objects.get()
    assert (trace.name, trace.tenant, trace.requests) == ("azure conv", None, 19366)
    assert first == f"imported trace {trace.pk} 'azure conv' (platform-wide)"


def test_the_api_imports_the_azure_trace_into_the_members_tenant(api, people):
    r = _upload(api("member"), AZURE.read_bytes(), "azure.csv")

    assert r.status_code == 201
    d = r.json()
    assert (d["requests"], d["prompt"]["p50"], d["output"]["p50"]) == (19366, 1020, 129)
    assert set(d) >= {"duration_s", "mean_rps", "peak_rps_1m", "prompt", "output"}
    assert set(d["prompt"]) == {"mean", "p50", "p90", "p99"}
    assert Trace.objects.get(pk=d["id"]).tenant.slug == "acme"


def test_a_staff_upload_is_platform_wide(api, people):
    r = _upload(api("operator"), _csv([HEADER, *ROWS]))
    assert r.status_code == 201
    assert r.json()["tenant"] is None


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_lf_and_crlf_files_are_both_accepted(api, people, newline):
    r = _upload(api("member"), _csv([HEADER, *ROWS], newline))
    assert r.status_code == 201
    assert r.json()["requests"] == 3
    assert r.json()["prompt"]["p50"] == 396


def test_bad_rows_are_a_400_listing_every_line_and_nothing_is_stored(api, people):
    r = _upload(api("member"), _csv(BAD, "\r\n"))

    assert r.status_code == 400
    error = r.json()["error"]
    assert [(x["line"], x["field"]) for x in error["lines"]] == [(3, "ContextTokens"), (5, "row")]
    assert error["fields"]["file"][0].startswith("line 3 ContextTokens: 'abc'")
    assert Trace.objects.count() == 0


@pytest.mark.django_db
def test_the_command_rejects_bad_rows_by_line_number_and_imports_nothing(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(_csv(BAD))
    err = StringIO()
    with pytest.raises(CommandError, match="2 bad line"):
        call_command("import_trace", str(path), stderr=err)
    assert [line.split(": ")[0] for line in err.getvalue().splitlines()] == [f"{path}:3", f"{path}:5"]
    assert Trace.objects.count() == 0


def test_another_tenants_trace_is_404_on_get_and_missing_from_the_list(api, people):
    mine = trace_import(data=_csv([HEADER, *ROWS]), name="acme's", tenant=people["member"].membership.tenant)
    platform = trace_import(data=_csv([HEADER, *ROWS]), name="everyone's", tenant=None)

    assert api("teammate").get(f"/api/v1/traces/{mine.pk}").status_code == 200
    assert api("outsider").get(f"/api/v1/traces/{mine.pk}").status_code == 404
    assert api("outsider").get(f"/api/v1/traces/{platform.pk}").status_code == 200
    assert [t["name"] for t in api("outsider").get("/api/v1/traces").json()] == ["everyone's"]
    assert sorted(t["name"] for t in api("teammate").get("/api/v1/traces").json()) == ["acme's", "everyone's"]


def test_sizing_from_a_trace_replays_its_arrivals_and_hides_other_tenants_traces(catalogue, api, people):
    mine = trace_import(data=_csv([HEADER, *ROWS]), name="acme's", tenant=people["member"].membership.tenant)
    body = sizing_body(prompt_tokens={"trace": str(mine.pk)}, output_tokens={"trace": str(mine.pk)})

    r = api("teammate").post("/api/v1/sizing", body, format="json")
    assert r.status_code == 200
    d = r.json()
    assert d["kv_simulation"]["source"] == "trace"
    assert d["kv_simulation"]["requests"] == 3
    assert d["input_tokens_per_s"] == 100 * (374 + 396 + 879) / 3
    assert d["trace"] == {"id": str(mine.pk), "name": "acme's"}

    denied = api("outsider").post("/api/v1/sizing", body, format="json")
    assert denied.status_code == 404
    assert denied.json()["error"]["message"].startswith("prompt_tokens.trace: no trace")
