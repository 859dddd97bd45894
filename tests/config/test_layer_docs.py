"""docs/architecture.md and docs/INTERFACES.md carry the layer line import-linter enforces (issue 50.6): every
root package in it, in the contract's order, and no room the contract does not know."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _contract() -> tuple[list[str], list[list[str]]]:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in tool["contracts"] if c["type"] == "layers")
    return tool["root_packages"], [[p.strip() for p in layer.split("|")] for layer in layers]


def _rooms(line: str) -> list[str]:
    return re.findall(r"[a-z_]+", line)


def test_the_contract_names_every_root_package_in_its_layers():
    roots, layers = _contract()
    assert sorted(p for layer in layers for p in layer) == sorted(roots)


# (file, where its line stands, the arrow between layers, whether it is drawn bottom-up)
DRAWINGS = [
    ("docs/architecture.md", r"Imports flow one way \(`([^`]+)`", "←", True),
    ("docs/INTERFACES.md", r"the same line as docs/architecture\.md: (.+?); the parenthesised", ">", False),
]


@pytest.mark.parametrize(("doc", "where", "arrow", "bottom_up"), DRAWINGS)
def test_the_doc_draws_the_contracts_line(doc, where, arrow, bottom_up):
    _, layers = _contract()
    text = " ".join((ROOT / doc).read_text().split())
    line = re.search(where, text)
    assert line is not None, doc
    drawn = [sorted(_rooms(part)) for part in line.group(1).split(arrow)]
    assert drawn == [sorted(layer) for layer in (reversed(layers) if bottom_up else layers)]
