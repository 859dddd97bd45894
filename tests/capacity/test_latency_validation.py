"""Leave-one-out over the catalogue: the median error must not grow past what docs/latency.md states."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from capacity.latency_validation import leave_one_out, median_error, pairs_from_rows

ROOT = Path(__file__).resolve().parents[2]


def _held_out():
    with open(ROOT / "data" / "operating_points.csv", newline="", encoding="utf-8") as fh:
        return leave_one_out(pairs_from_rows(csv.DictReader(fh)))


def _documented(name: str) -> float:
    text = (ROOT / "docs" / "latency.md").read_text(encoding="utf-8")
    found = re.search(rf"{name}: ([0-9.]+) %", text)
    assert found, f"docs/latency.md states no '{name}'"
    return float(found.group(1))


def test_median_error_is_no_worse_than_documented():
    rows = _held_out()
    assert round(median_error(rows) * 100, 1) <= _documented("Documented median error")


def test_worst_error_is_no_worse_than_documented():
    rows = _held_out()
    assert round(max(r.error for r in rows) * 100, 1) <= _documented("Worst")


def test_every_pair_with_two_points_is_held_out_point_by_point():
    rows = _held_out()
    assert len(rows) == 27
    tpot = [r for r in rows if r.quantity == "TPOT p99 s"]
    assert len(tpot) == 10  # the Server and Interactive points of the five pairs that have both


def test_the_documented_table_is_the_computed_one():
    rows = _held_out()
    text = (ROOT / "docs" / "latency.md").read_text(encoding="utf-8")
    for r in rows:
        assert f"| {r.pair} | {r.point} | {r.quantity} |" in text
        assert f"| {r.error:.1%} |" in text
