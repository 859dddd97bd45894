"""capacity.traces: the Azure LLM trace format, all-or-nothing parsing, and its statistics."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.traces import HEADER, TraceParseError, characterise, parse_trace

AZURE = Path(__file__).resolve().parents[2] / "data" / "azure_llm_2023_conv.csv"


def csv(*rows: str, eol: str = "\r\n") -> str:
    return eol.join([HEADER, *rows]) + eol


def test_azure_conversation_trace_reproduces_the_published_medians():
    trace = parse_trace(AZURE.read_bytes())
    stats = characterise(trace)
    assert stats.requests == 19_366
    assert stats.prompt.p50 == 1020
    assert stats.output.p50 == 129
    assert trace.first_timestamp == "2023-11-16 18:15:46.6805900"
    # last request 2023-11-16 19:14:08.4025270 − first 18:15:46.6805900 = 3,501.721937 s
    assert stats.duration_s == pytest.approx(3501.721937, abs=1e-9)
    assert stats.mean_rps == pytest.approx(19_366 / 3501.721937)


def test_seven_fractional_digits_are_exact():
    # 18:15:46.6805900 → 18:15:50.9951690 = 4.314579 s
    t = parse_trace(csv("2023-11-16 18:15:46.6805900,374,44", "2023-11-16 18:15:50.9951690,396,109"))
    assert t.arrival_s.tolist() == [0.0, 4.314579]
    assert t.prompt.tolist() == [374, 396]
    assert t.output.tolist() == [44, 109]
    assert t.prompt.dtype == np.int64
    assert t.arrival_s.dtype == np.float64


def test_crlf_lf_bytes_str_and_bom_agree():
    rows = ("2023-11-16 18:15:46.6805900,374,44", "2023-11-16 18:15:47.0000000,5,6")
    variants = [csv(*rows), csv(*rows, eol="\n"), csv(*rows).encode(), b"\xef\xbb\xbf" + csv(*rows).encode()]
    variants.append(csv(*rows, eol="\n").rstrip("\n"))
    parsed = [parse_trace(v) for v in variants]
    for p in parsed:
        assert p.arrival_s.tolist() == parsed[0].arrival_s.tolist()
        assert p.prompt.tolist() == [374, 5]


def test_rows_out_of_order_are_sorted():
    t = parse_trace(csv("2023-11-16 18:00:02.0000000,2,20", "2023-11-16 18:00:00.5000000,1,10"))
    assert t.arrival_s.tolist() == [0.0, 1.5]
    assert t.prompt.tolist() == [1, 2]
    assert t.first_timestamp == "2023-11-16 18:00:00.5000000"


def test_looser_timestamps_are_accepted():
    t = parse_trace(csv("2023-11-16 18:00:00,1,1", "2023-11-16T18:00:00.25,1,1", "2024-02-29 00:00:00.1234567,1,1"))
    expected = (dt.datetime(2024, 2, 29, 0, 0, 0) - dt.datetime(2023, 11, 16, 18)).total_seconds() + 0.1234567
    assert t.arrival_s.tolist() == pytest.approx([0.0, 0.25, expected], abs=1e-9)


def test_every_error_is_reported_and_nothing_is_returned():
    text = csv(
        "2023-11-16 18:15:46.6805900,374,44",
        "2023-02-29 18:15:46.6805900,x,",
        "",
        "2023-11-16 18:15:46,1,2,3",
        "2023-11-16 25:00:00.0000000,-5,1_0",
        "2023-11-16 18:15:47.0000000,1234567890123,7",
    )
    with pytest.raises(TraceParseError) as e:
        parse_trace(text)
    assert e.value.errors == [
        (3, "ContextTokens", "'x' is not a whole number of tokens ≥ 0"),
        (3, "GeneratedTokens", "is empty"),
        (
            3,
            "TIMESTAMP",
            "'2023-02-29 18:15:46.6805900' is not a valid time: expected a time like 2023-11-16 18:15:46.6805900",
        ),
        (4, "row", "expected 3 comma-separated fields, got 0"),
        (5, "row", "expected 3 comma-separated fields, got 4"),
        (6, "ContextTokens", "'-5' is not a whole number of tokens ≥ 0"),
        (6, "GeneratedTokens", "'1_0' is not a whole number of tokens ≥ 0"),
        (
            6,
            "TIMESTAMP",
            "'2023-11-16 25:00:00.0000000' is not a valid time: expected a time like 2023-11-16 18:15:46.6805900",
        ),
        (7, "ContextTokens", "'1234567890123…' is too large"),
    ]
    assert str(e.value).startswith("9 error(s) in trace: line 3 ContextTokens")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", (1, "header", "expected exactly 'TIMESTAMP,ContextTokens,GeneratedTokens', got ''")),
        (
            "timestamp,ContextTokens,GeneratedTokens\n1,2,3\n",
            (
                1,
                "header",
                "expected exactly 'TIMESTAMP,ContextTokens,GeneratedTokens', got 'timestamp,ContextTokens,GeneratedTokens'",
            ),
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens,Extra\n",
            (
                1,
                "header",
                "expected exactly 'TIMESTAMP,ContextTokens,GeneratedTokens', got 'TIMESTAMP,ContextTokens,GeneratedTokens,Extra'",
            ),
        ),
        (HEADER + "\r\n", (2, "row", "no requests after the header")),
    ],
)
def test_header_and_empty(text, error):
    with pytest.raises(TraceParseError) as e:
        parse_trace(text)
    assert e.value.errors == [error]


def test_non_utf8_bytes_are_a_row_error():
    data = (HEADER + "\n2023-11-16 18:15:46.6805900,3\xff4,1\n").encode("latin-1")
    with pytest.raises(TraceParseError) as e:
        parse_trace(data)
    assert [(ln, field) for ln, field, _ in e.value.errors] == [(2, "ContextTokens")]


def test_characterise_by_hand():
    # 5 requests at 0, 10, 30, 65, 100 s: duration 100 s, mean 5 / 100 = 0.05 req/s;
    # windows of 60 s from each request: [0,60) 3, [10,70) 3, [30,90) 2, [65,125) 2, [100,160) 1 → peak 3 / 60
    rows = [
        f"2023-11-16 18:{m:02d}:{s:02d}.0000000,{p},{o}"
        for (m, s), p, o in zip(
            [(0, 0), (0, 10), (0, 30), (1, 5), (1, 40)], [10, 20, 30, 40, 50], [1, 2, 3, 4, 100], strict=True
        )
    ]
    stats = characterise(parse_trace(csv(*rows)))
    assert stats.requests == 5
    assert stats.duration_s == 100
    assert stats.mean_rps == pytest.approx(0.05)
    assert stats.peak_rps_1m == pytest.approx(3 / 60)
    # linear percentiles: p50 30, p90 = 40 + 0.6 × 10 = 46, p99 = 40 + 0.96 × 10 = 49.6
    assert stats.prompt.to_dict() == pytest.approx({"mean": 30.0, "p50": 30.0, "p90": 46.0, "p99": 49.6})
    assert stats.output.mean == 22
    assert stats.to_dict()["requests"] == 5


def test_single_request_has_a_rate():
    stats = characterise(parse_trace(csv("2023-11-16 18:00:00.0000000,1,1")))
    assert (stats.requests, stats.duration_s, stats.mean_rps, stats.peak_rps_1m) == (1, 0.0, 1.0, 1 / 60)


stamps = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 12, 31))


@settings(max_examples=50, deadline=None)
@given(
    rows=st.lists(
        st.tuples(stamps, st.integers(0, 10**6), st.integers(0, 10**5), st.integers(0, 9)), min_size=1, max_size=50
    ),
    lf=st.booleans(),
)
def test_round_trip(rows, lf):
    lines = [f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond:06d}{d},{p},{o}" for t, p, o, d in rows]
    trace = parse_trace(csv(*lines, eol="\n" if lf else "\r\n"))
    ticks = sorted(
        (int((t - dt.datetime(1970, 1, 1)).total_seconds()) * 10**7 + t.microsecond * 10 + d, i)
        for i, (t, _, _, d) in enumerate(rows)
    )
    first = ticks[0][0]
    assert trace.arrival_s.tolist() == pytest.approx([(k - first) / 1e7 for k, _ in ticks], abs=1e-6)
    assert trace.prompt.tolist() == [rows[i][1] for _, i in ticks]
    assert trace.output.tolist() == [rows[i][2] for _, i in ticks]
