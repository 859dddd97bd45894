"""Trace upload in bounded memory (issue 29.2): the CSV is parsed block by block as the upload is
read, so a 64 MB file (the default TRACE_MAX_BYTES) holds about its result's columns, not ~9× the file.

Memory is measured with tracemalloc (numpy reports its buffers to it): the peak of the whole import,
parse, characterisation, .npz and the row's write, under the 256 MB a request may use."""

from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest
from django.core.files import File

from capacity import traces
from capacity.traces import TraceParseError, parse_trace, parse_trace_stream
from telemetry.models import Trace
from telemetry.trace_import import trace_import

HEADER = b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
MB = 2**20


def _rows(n: int, start: int = 0) -> bytes:
    return "".join(
        f"2023-11-16 {18 + (i // 3600) % 6:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.{i * 7919 % 10**7:07d},"
        f"{1000 + i % 3000},{100 + i % 400}\n"
        for i in range(start, start + n)
    ).encode()


@pytest.mark.postgres
def test_a_64_mb_upload_is_imported_in_bounded_memory(db, tmp_path):
    block = _rows(20_000)
    path = tmp_path / "big.csv"
    with path.open("wb") as f:
        f.write(HEADER)
        for _ in range(64 * MB // len(block)):
            f.write(block)
    rows = (64 * MB // len(block)) * 20_000
    tracemalloc.start()
    try:
        with path.open("rb") as fh:
            trace = trace_import(data=File(fh).chunks(), name="big", tenant=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert Trace.objects.get(pk=trace.pk).requests == rows
    # the result's three int64 columns are 24 B a row (~40 MB here); reading the file whole cost ~590 MB
    assert peak < 160 * MB, f"peak {peak / MB:.0f} MB"
    stored = np.load(io.BytesIO(bytes(Trace.objects.get(pk=trace.pk).data)))
    copies = 64 * MB // len(block)
    assert int(stored["prompt"].sum()) == copies * sum(1000 + i % 3000 for i in range(20_000))


def _pieces(data: bytes, size: int):
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("block", [64, 100, 1 << 20])
@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_any_block_and_chunk_size_reads_the_same_trace(monkeypatch, block, piece):
    data = HEADER + _rows(300, start=500) + _rows(200)  # out of order: sorted across blocks
    whole = parse_trace(data)
    monkeypatch.setattr(traces, "BLOCK", block)
    streamed = parse_trace_stream(_pieces(data, piece))
    assert streamed.first_timestamp == whole.first_timestamp == "2023-11-16 18:00:00.0000000"
    assert streamed.arrival_s.tolist() == whole.arrival_s.tolist()
    assert (streamed.prompt.tolist(), streamed.output.tolist()) == (whole.prompt.tolist(), whole.output.tolist())


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_bad_rows_are_named_by_their_line_whatever_the_block(monkeypatch, block):
    monkeypatch.setattr(traces, "BLOCK", block)
    data = HEADER + _rows(10) + b"2023-11-16 18:00:00.0000000,x,1\n" + _rows(10) + b"\n\n"
    with pytest.raises(TraceParseError) as e:
        parse_trace_stream(_pieces(data, 5))
    assert [(ln, field) for ln, field, _ in e.value.errors] == [(12, "ContextTokens"), (23, "row"), (24, "row")]


def test_a_file_of_bad_rows_stops_at_max_errors_and_says_so(monkeypatch):
    monkeypatch.setattr(traces, "BLOCK", 4096)
    data = HEADER + b"nonsense,1,1\n" * (traces.MAX_ERRORS * 5)
    with pytest.raises(TraceParseError) as e:
        parse_trace_stream([data])
    assert len(e.value.errors) == traces.MAX_ERRORS and e.value.more
    assert e.value.errors[0][0] == 2 and e.value.errors[-1][0] == traces.MAX_ERRORS + 1


def test_the_header_is_still_checked_and_an_empty_file_refused():
    with pytest.raises(TraceParseError) as e:
        parse_trace_stream([b"TIMESTAMP,Context", b"Tokens,Out\n1,2,3\n"])
    assert e.value.errors[0][:2] == (1, "header")
    with pytest.raises(TraceParseError) as e:
        parse_trace_stream([b"\xef\xbb\xbf" + HEADER])
    assert e.value.errors == [(2, "row", "no requests after the header")]
