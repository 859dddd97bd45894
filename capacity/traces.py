"""The Azure LLM inference trace format (`TIMESTAMP,ContextTokens,GeneratedTokens`) and its statistics.

Parsing is all-or-nothing: every bad row is reported (line number, column, what is wrong) in one
`TraceParseError`, and no partial trace is ever returned. Timestamps carry 7 fractional digits
(`2023-11-16 18:15:46.6805900`), more than `datetime` parses, so they are decoded column-wise as
bytes into integer 100 ns ticks: exact, and fast enough for the 19k-row file in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
TICKS_PER_S = 10_000_000
_MAX_DIGITS = 12  # a trillion tokens per request is already absurd; it also keeps int64 safe
# Bytes parsed at a time: numpy's intermediates cost about 15 times the block, so 1 MiB of work at
# once keeps a 64 MB file's parse within the result's own columns plus a few tens of MB.
BLOCK = 1 << 20
_HEADER_PEEK = 4096  # a header longer than this is wrong anyway
MAX_ERRORS = 1000  # bad rows listed before reading stops (the file is refused either way)

IntArray = npt.NDArray[np.int64]


class TraceParseError(ValueError):
    """`errors` lists (line, field, message), lines counted from 1 with the header as line 1."""

    def __init__(self, errors: list[tuple[int, str, str]], *, more: bool = False) -> None:
        self.errors = errors
        self.more = more  # reading stopped at MAX_ERRORS: the file has more bad rows than listed
        shown = "; ".join(f"line {ln} {field}: {msg}" for ln, field, msg in errors[:5])
        more_text = f" (and {len(errors) - 5}{' or more' if more else ''} more)" if len(errors) > 5 else ""
        super().__init__(f"{len(errors)}{'+' if more else ''} error(s) in trace: {shown}{more_text}")


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests sorted by arrival. `arrival_s` counts from the first request."""

    arrival_s: npt.NDArray[np.float64]
    prompt: IntArray
    output: IntArray
    first_timestamp: str

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class LengthStats:
    mean: float
    p50: float
    p90: float
    p99: float

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True)
class TraceStats:
    """`peak_rps_1m` is the most requests in any 60 s window starting at a request (a sliding
    window, not clock-aligned minutes), divided by 60. `mean_rps` = requests ÷ duration_s, with
    the duration taken as at least 1 s so a one-instant trace still has a rate."""

    requests: int
    duration_s: float
    mean_rps: float
    peak_rps_1m: float
    prompt: LengthStats
    output: LengthStats

    def to_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "duration_s": self.duration_s,
            "mean_rps": self.mean_rps,
            "peak_rps_1m": self.peak_rps_1m,
            "prompt": self.prompt.to_dict(),
            "output": self.output.to_dict(),
        }


_BOM = b"\xef\xbb\xbf"
_STAMP_HINT = "expected a time like 2023-11-16 18:15:46.6805900"
_LOOSE = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?", re.ASCII)
# Byte offsets in 'YYYY-MM-DD HH:MM:SS.fffffff' (27 bytes).
_STAMP_LEN = 27
_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22, 23, 24, 25, 26]
_SEPARATORS = {4: ord("-"), 7: ord("-"), 10: ord(" "), 13: ord(":"), 16: ord(":"), 19: ord(".")}


def parse_trace(data: str | bytes) -> Trace:
    """Parse the CSV (CRLF or LF, a trailing newline optional). Raises TraceParseError listing
    every problem; rows out of time order are accepted and sorted."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return parse_trace_stream([raw])


def parse_trace_stream(chunks: Iterable[bytes]) -> Trace:
    """`parse_trace` over the file's bytes in pieces of any size (an upload's chunks), in memory
    bounded by one BLOCK of work plus the result's three int64 columns (docs/input-limits.md).

    The fast path reads the well-formed rows of each block straight from the bytes with numpy
    (delimiter positions, fixed-width timestamp columns, digit matrices); only rows it rejects are
    looked at one by one, to accept looser timestamps or to say exactly what is wrong. Past
    MAX_ERRORS bad rows it stops reading: the file is refused anyway, and listing a million bad rows
    would cost the request the memory and time this is bounded against.
    """
    acc = _Accumulator()
    for block, line in _blocks(chunks):
        acc.add(block, line)
        if len(acc.errors) >= MAX_ERRORS:
            raise TraceParseError(sorted(acc.errors)[:MAX_ERRORS], more=True)
    return acc.result()


def _blocks(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    """(block, line number of its first row): whole lines of about BLOCK bytes after the checked header."""
    pending, line, header_done = b"", 2, False
    for chunk in chunks:
        pending = pending + chunk if pending else chunk  # one big chunk (a whole file) is not copied
        pos = 0
        if not header_done:
            if b"\n" not in pending[:_HEADER_PEEK] and len(pending) < _HEADER_PEEK:
                continue
            _check_header(pending[:_HEADER_PEEK])
            pos, header_done = pending.find(b"\n") + 1 or len(pending), True
        view = memoryview(pending)
        while len(pending) - pos >= BLOCK:
            cut = pending.rfind(b"\n", pos, pos + BLOCK) + 1
            if cut <= pos:  # no newline within a block: a line that long is one bad row, read it whole
                cut = pending.find(b"\n", pos + BLOCK) + 1
                if not cut:
                    break
            block = bytes(view[pos:cut])
            yield block, line
            line += block.count(b"\n")
            pos = cut
        pending = bytes(view[pos:])
        view.release()
    if not header_done:
        _check_header(pending)
        pending = b""
    if pending or line == 2:
        yield pending, line


def _check_header(head: bytes) -> None:
    header = head.removeprefix(_BOM).partition(b"\n")[0]
    if header.removesuffix(b"\r") != HEADER.encode():
        got = header[:80].decode("utf-8", errors="replace")
        raise TraceParseError([(1, "header", f"expected exactly '{HEADER}', got '{got}'")])


class _Accumulator:
    """The columns of the blocks read so far, and the earliest request's timestamp text."""

    def __init__(self) -> None:
        self.ticks: list[IntArray] = []
        self.prompt: list[IntArray] = []
        self.output: list[IntArray] = []
        self.errors: list[tuple[int, str, str]] = []
        self.first: tuple[int, str] | None = None  # (ticks, text) of the earliest row, first on a tie

    def add(self, block: bytes, line: int) -> None:
        rest = block.removesuffix(b"\n")
        if not rest:  # nothing after the header, or a blank line at the very end (as in one piece)
            self.errors.append((2, "row", "no requests after the header") if line == 2 else
                               (line, "row", "expected 3 comma-separated fields, got 0"))  # fmt: skip
            return
        got = _parse_block(rest, line, self.errors)
        if got is None:
            return
        ticks, prompt, output, first = got
        if self.first is None or first[0] < self.first[0]:
            self.first = first
        self.ticks.append(ticks)
        self.prompt.append(prompt)
        self.output.append(output)

    def result(self) -> Trace:
        if self.errors:
            raise TraceParseError(sorted(self.errors))
        if not self.ticks or self.first is None:
            raise TraceParseError([(2, "row", "no requests after the header")])
        ticks, self.ticks = np.concatenate(self.ticks), []
        prompt, self.prompt = np.concatenate(self.prompt), []
        output, self.output = np.concatenate(self.output), []
        if np.any(ticks[1:] < ticks[:-1]):
            order = np.argsort(ticks, kind="stable")
            ticks, prompt, output = ticks[order], prompt[order], output[order]
            del order
        ticks -= ticks[0]  # in int64, exact, before the float: 100 ns ticks since 1970 exceed its 53 bits
        arrival = ticks.astype(np.float64)
        del ticks
        arrival /= TICKS_PER_S
        return Trace(arrival, prompt, output, self.first[1])


def _parse_block(
    rest: bytes, line0: int, errors: list[tuple[int, str, str]]
) -> tuple[IntArray, IntArray, IntArray, tuple[int, str]] | None:
    """One block of whole rows (no trailing newline): its columns and earliest row, or None (errors added)."""
    # Padding lets fixed-width windows run past the last row without bounds checks.
    buf = np.frombuffer(rest + b"\n" * _STAMP_LEN, dtype=np.uint8)
    size = len(rest)
    newlines = np.flatnonzero(buf[:size] == ord("\n"))
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [size]))
    ends = ends - (buf[np.maximum(ends - 1, 0)] == ord("\r")) * (ends > starts)
    commas = np.flatnonzero(buf[:size] == ord(","))
    first_comma = np.searchsorted(commas, starts)
    shape_ok = np.searchsorted(commas, ends) - first_comma == 2
    if len(commas):
        c1 = np.where(shape_ok, commas[np.minimum(first_comma, len(commas) - 1)], starts)
        c2 = np.where(shape_ok, commas[np.minimum(first_comma + 1, len(commas) - 1)], starts)
    else:
        c1, c2 = starts, starts
    ticks, ts_ok = _fixed_stamps(buf, starts, c1)
    prompt, prompt_ok = _digits(buf, c1 + 1, c2)
    output, output_ok = _digits(buf, c2 + 1, ends)
    before = len(errors)
    for i in np.flatnonzero(~(shape_ok & ts_ok & prompt_ok & output_ok)):
        if len(errors) >= MAX_ERRORS:
            break
        text = rest[starts[i] : ends[i]].decode("utf-8", errors="replace")
        row = _slow_row(text, int(i) + line0, errors)
        if row is not None:
            ticks[i], prompt[i], output[i] = row
    if len(errors) > before:
        return None
    i0 = int(np.argmin(ticks))  # the first of the earliest: argsort is stable
    return ticks, prompt, output, (int(ticks[i0]), rest[starts[i0] : c1[i0]].decode("ascii"))


def _fixed_stamps(
    buf: npt.NDArray[np.uint8], starts: IntArray, stops: IntArray
) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """Ticks for every field that is exactly the 27-byte form; `ok` False elsewhere."""
    d = sliding_window_view(buf, _STAMP_LEN)[starts] - np.uint8(ord("0"))
    # uint8 wraps below '0', so one comparison rejects every non-digit.
    ok = (stops - starts == _STAMP_LEN) & np.all(d[:, _DIGITS] <= 9, axis=1)
    for pos, ch in _SEPARATORS.items():
        ok &= d[:, pos] == np.uint8((ch - ord("0")) % 256)

    def num(a: int, b: int) -> IntArray:
        v = np.zeros(len(starts), dtype=np.int64)
        for k in range(a, b):
            v = v * 10 + d[:, k]
        return v

    t, good = _to_ticks(num(0, 4), num(5, 7), num(8, 10), num(11, 13), num(14, 16), num(17, 19), num(20, 27))
    return t, ok & good


def _digits(buf: npt.NDArray[np.uint8], starts: IntArray, stops: IntArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """Plain ASCII whole numbers (1–12 digits, no sign, spaces or underscores) in [start, stop)."""
    width = stops - starts
    # Only as many columns as the widest plausible value: token counts rarely pass 5 digits.
    cols = int(np.clip(width.max(), 1, _MAX_DIGITS))
    d = sliding_window_view(buf, cols)[np.minimum(starts, len(buf) - cols)] - np.uint8(ord("0"))
    inside = np.arange(cols) < width[:, None]
    ok = (width >= 1) & (width <= _MAX_DIGITS) & np.all(~inside | (d <= 9), axis=1)
    v = np.zeros(len(starts), dtype=np.int64)
    for k in range(cols):
        v = np.where(inside[:, k], v * 10 + d[:, k], v)
    return np.where(ok, v, 0), ok


def _slow_row(line: str, lineno: int, errors: list[tuple[int, str, str]]) -> tuple[int, int, int] | None:
    """One rejected row, re-read as text: its values if it is fine after all, else its errors."""
    fields = line.split(",")
    if len(fields) != 3:
        got = len(fields) if line else 0
        errors.append((lineno, "row", f"expected 3 comma-separated fields, got {got}"))
        return None
    before = len(errors)
    t = _loose_ticks(fields[0])
    if t is None:
        errors.append((lineno, "TIMESTAMP", f"'{fields[0][:40]}' is not a valid time: {_STAMP_HINT}"))
    counts = [_count(v, name, lineno, errors) for v, name in zip(fields[1:], COLUMNS[1:], strict=True)]
    if len(errors) > before or t is None:
        return None
    return t, counts[0], counts[1]


def _count(v: str, field: str, lineno: int, errors: list[tuple[int, str, str]]) -> int:
    if v.isascii() and v.isdigit() and len(v) <= _MAX_DIGITS:
        return int(v)
    if v == "":
        errors.append((lineno, field, "is empty"))
    elif v.isascii() and v.isdigit():
        errors.append((lineno, field, f"'{v[:20]}…' is too large"))
    else:
        errors.append((lineno, field, f"'{v[:20]}' is not a whole number of tokens ≥ 0"))
    return 0


def _loose_ticks(s: str) -> int | None:
    m = _LOOSE.fullmatch(s)
    if not m:
        return None
    y, mo, d, h, mi, sec = (np.array([int(g)], dtype=np.int64) for g in m.groups()[:6])
    frac = (m.group(7) or "").ljust(7, "0")[:7]
    t, good = _to_ticks(y, mo, d, h, mi, sec, np.array([int(frac)], dtype=np.int64))
    return int(t[0]) if bool(good[0]) else None


def _to_ticks(
    y: IntArray, mo: IntArray, d: IntArray, h: IntArray, mi: IntArray, s: IntArray, frac7: IntArray
) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """Calendar fields → ticks, with a validity mask (days per month, leap years, ranges)."""
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    month_days = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)
    mo_ok = (mo >= 1) & (mo <= 12)
    dim = month_days[np.clip(mo, 1, 12) - 1] + ((np.clip(mo, 1, 12) == 2) & leap)
    good = mo_ok & (d >= 1) & (d <= dim) & (h <= 23) & (mi <= 59) & (s <= 59) & (y >= 1)
    # Days from civil (H. Hinnant): proleptic Gregorian day number, 1970-01-01 = 0.
    yy = y - (mo <= 2)
    era = yy // 400
    yoe = yy - era * 400
    mp = (mo + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    seconds = days * 86400 + h * 3600 + mi * 60 + s
    return seconds * TICKS_PER_S + frac7, good


def characterise(trace: Trace) -> TraceStats:
    """Requests, duration, mean and peak-minute rate, and prompt/output mean, p50, p90, p99
    (numpy's default linear percentiles; they give the published medians 1,020 and 129)."""
    t = trace.arrival_s
    n = len(t)
    duration = float(t[-1] - t[0])
    in_window = np.searchsorted(t, t + 60.0, side="left") - np.arange(n)
    return TraceStats(
        requests=n,
        duration_s=duration,
        mean_rps=n / max(duration, 1.0),
        peak_rps_1m=float(in_window.max()) / 60.0,
        prompt=_stats(trace.prompt),
        output=_stats(trace.output),
    )


def _stats(x: IntArray) -> LengthStats:
    p50, p90, p99 = (float(v) for v in np.percentile(x, [50, 90, 99]))
    return LengthStats(mean=float(x.mean()), p50=p50, p90=p90, p99=p99)
