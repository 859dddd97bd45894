"""Django's `{# … #}` comment ends at the line: one spread over lines is printed as page text (inside a
CSS grid it became a third column item and pushed the launch form's sizing panel below the first screen)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_template_comment_spans_lines():
    bad = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            start = line.find("{#")
            if start != -1 and "#}" not in line[start:]:
                bad.append(f"{path.relative_to(ROOT)}:{n}")
    assert bad == []
