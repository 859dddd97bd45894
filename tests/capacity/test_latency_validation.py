"""Leave-one-out over the catalogue: the model against measured points it did not see (TTFT p99, TPOT p99,
saturation), no worse than docs/latency.md states, and each half's worst within the issue's 50 %."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

import pytest

from capacity.latency_validation import SATURATION, TPOT, TTFT, leave_one_out, pairs_from_rows, summary
from demo.loaders import prompt_per_output

ROOT = Path(__file__).resolve().parents[2]


def _held_out():
    with open(ROOT / "data" / "operating_points.csv", newline="", encoding="utf-8") as fh:
        return leave_one_out(pairs_from_rows(csv.DictReader(fh), prompt_per_output))


def _documented(quantity: str) -> tuple[float, float]:
    text = (ROOT / "docs" / "latency.md").read_text(encoding="utf-8")
    found = re.search(rf"\| {re.escape(quantity)} \| \d+ \| ([0-9.]+) % \| ([0-9.]+) % \|", text)
    assert found, f"docs/latency.md states no leave-one-out line for '{quantity}'"
    return float(found.group(1)), float(found.group(2))


@pytest.mark.parametrize("quantity", [TTFT, TPOT, SATURATION])
def test_median_and_worst_are_no_worse_than_documented(quantity):
    _, med, worst = summary(_held_out())[quantity]
    doc_med, doc_worst = _documented(quantity)
    assert round(med * 100, 1) <= doc_med and round(worst * 100, 1) <= doc_worst


@pytest.mark.parametrize("quantity", [TTFT, TPOT])
def test_each_half_predicts_every_unseen_measured_point_within_half(quantity):
    # Each row: a point's measured p99 from the catalogue CSV, against the curve fitted without it.
    rows = [r for r in _held_out() if r.quantity == quantity]
    assert len(rows) == 10  # the Server and Interactive points of the five pairs that have both
    for r in rows:
        assert r.measured > 0 and r.borrowed  # held out: the rest is one point, so the shape is borrowed
        assert r.error <= 0.5, (r.pair, r.point, r.measured, r.predicted)


def test_every_pair_with_two_points_is_held_out_point_by_point():
    rows = _held_out()
    assert len(rows) == 37  # 10 latency points × (TTFT, TPOT) + 17 saturation points
    assert sum(r.quantity == SATURATION for r in rows) == 17


def test_the_documented_table_is_the_computed_one():
    rows = _held_out()
    text = (ROOT / "docs" / "latency.md").read_text(encoding="utf-8")
    for r in rows:
        assert f"| {r.pair} | {r.point} | {r.quantity} |" in text
        assert f"| {r.error:.1%} |" in text


def test_a_held_out_point_never_reaches_its_own_prediction():
    # Tripling a point's measured TTFT and TPOT changes the row that holds it out not at all: its pair's
    # fit sees only the rest, and the donors (u, TTFT's elasticity β) are the other pairs' curves.
    with open(ROOT / "data" / "operating_points.csv", newline="", encoding="utf-8") as fh:
        pairs = pairs_from_rows(csv.DictReader(fh), prompt_per_output)
    base = {(r.pair, r.point, r.quantity): r.predicted for r in leave_one_out(pairs)}
    for key, (acc, pts) in pairs.items():
        if sum(p.has_latency for p in pts) < 2:
            continue
        for i, p in enumerate(pts):
            if not p.has_latency:
                continue
            bent = replace(p, ttft_p99_s=3 * p.ttft_p99_s, tpot_p99_s=3 * p.tpot_p99_s)
            changed = {**pairs, key: (acc, tuple(bent if j == i else q for j, q in enumerate(pts)))}
            for r in leave_one_out(changed):
                if (r.pair, r.point) == (key, p.label):
                    assert r.predicted == base[(r.pair, r.point, r.quantity)], (key, p.label, r.quantity)


def test_ttft_meets_the_goal_on_points_it_did_not_see():
    n, med, worst = summary(_held_out())[TTFT]
    assert n == 10 and med <= 0.15 and worst <= 0.5
