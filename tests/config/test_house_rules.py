"""Issue 50's must-shows that a grep can check, kept: every input error naming a field is of the FieldError
family (capacity/input_errors.py), and no "CONTRACT §" citation sits outside docs/ (the contract is
docs/contract.md; code cites it by that name)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _production() -> list[Path]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / f for f in files.stdout.split() if not f.startswith(("tests/", "docs/")) and "/migrations/" not in f]


def _sets_field(cls: ast.ClassDef) -> bool:
    return any(
        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" and t.attr == "field"
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign)
        for t in node.targets
    )


def test_only_field_error_itself_stores_a_field():
    # A subclass gets .field from FieldError.__init__; a class that stores its own is a second family.
    own = [
        f"{path.relative_to(ROOT)}:{node.name}"
        for path in _production()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and _sets_field(node)
    ]
    assert own == ["capacity/input_errors.py:FieldError"]


def test_no_contract_section_citation_outside_docs():
    found = subprocess.run(
        ["git", "grep", "-n", "CONTRACT §", "--", ".", ":!docs"], cwd=ROOT, capture_output=True, text=True
    )
    hits = [line for line in found.stdout.splitlines() if not line.startswith("tests/config/test_house_rules.py")]
    assert hits == []
