"""docs/architecture.md and docs/INTERFACES.md carry the layer line import-linter enforces (issue 50.6): every
root package in it, in the contract's order, and no room the contract does not know."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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


def test_architecture_md_draws_the_contracts_line_bottom_up():
    _, layers = _contract()
    text = " ".join((ROOT / "docs/architecture.md").read_text().split())
    line = re.search(r"Imports flow one way \(`([^`]+)`", text)
    assert line is not None
    drawn = [sorted(_rooms(part)) for part in line.group(1).split("←")]
    assert drawn == [sorted(layer) for layer in reversed(layers)]


def test_interfaces_md_draws_the_contracts_line_top_down():
    _, layers = _contract()
    text = " ".join((ROOT / "docs/INTERFACES.md").read_text().split())
    line = re.search(r"the same line as docs/architecture\.md: (.+?); the parenthesised", text)
    assert line is not None
    drawn = [sorted(_rooms(part)) for part in line.group(1).split(">")]
    assert drawn == [sorted(layer) for layer in layers]
