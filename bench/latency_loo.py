"""The leave-one-out table of docs/latency.md: every catalogue pair with two or more usable points,
each point held out in turn and predicted by the curve fitted on the rest (capacity/latency_validation.py):
TTFT p99 and TPOT p99 at a latency point's throughput, saturation at an Offline point's; each row's
reference mix (prompt ÷ output tokens) as the catalogue loads it (demo/loaders.py). Prints the
summary (per quantity: points, median and worst error, against the goal of median ≤ 15 % and worst
≤ 50 % per half) and the table; `--write` puts both into docs/latency.md between its markers.

Run: .venv/bin/python bench/latency_loo.py [--write]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.latency_validation import leave_one_out, markdown_table, pairs_from_rows, summary  # noqa: E402
from demo.loaders import prompt_per_output  # noqa: E402

START, END = "<!-- leave-one-out: start (bench/latency_loo.py --write) -->", "<!-- leave-one-out: end -->"
GOAL_MEDIAN, GOAL_WORST = 0.15, 0.50


def section() -> str:
    with open(ROOT / "data" / "operating_points.csv", newline="", encoding="utf-8") as fh:
        rows = leave_one_out(pairs_from_rows(csv.DictReader(fh), prompt_per_output))
    lines = [
        "| quantity | points | median error | worst error | goal (median ≤ 15 %, worst ≤ 50 %) |",
        "|---|---:|---:|---:|---|",
    ]
    for q, (n, med, worst) in summary(rows).items():
        met = med <= GOAL_MEDIAN and worst <= GOAL_WORST
        lines.append(f"| {q} | {n} | {med * 100:.1f} % | {worst * 100:.1f} % | {'met' if met else 'MISSED'} |")
    misses = [r for r in rows if r.error > GOAL_MEDIAN]
    lines.append("")
    lines.append(
        f"Points predicted more than 15 % off ({len(misses)} of {len(rows)}): "
        + "; ".join(f"{r.pair.split(' (')[0]} {r.point} {r.quantity.split(' s')[0]} {r.error:.1%}" for r in misses)
        + "."
    )
    lines.append("")
    lines.append(markdown_table(rows))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the section into docs/latency.md")
    text = section()
    print(text)
    if ap.parse_args().write:
        doc = ROOT / "docs" / "latency.md"
        body = doc.read_text(encoding="utf-8")
        head, rest = body.split(START, 1)
        _, tail = rest.split(END, 1)
        doc.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
