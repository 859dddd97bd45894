"""No app imports another app's private name (issue 34): a leading underscore means "this module's own", so
a rule another app needs is made public where it lives (telemetry.usage, entitlements.bought) instead of
being borrowed. Read from the source with ast: every `from a.b import _x` and `import a._b` in the apps'
code (migrations aside), whose top package differs from the importing file's."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]


def private_imports_across_apps(source: str, app: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in APPS and top != app:
                parts = node.module.split(".")[1:]
                found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
                found += [node.module] if any(p.startswith("_") and p != "__init__" for p in parts) else []
        elif isinstance(node, ast.Import):
            for a in node.names:
                top, *parts = a.name.split(".")
                if top in APPS and top != app and any(p.startswith("_") for p in parts):
                    found.append(a.name)
    return found


def test_the_scan_sees_a_private_import_across_apps_and_not_within_one():
    assert private_imports_across_apps("from telemetry.statement import _scope, statement\n", "forecasting") == [
        "telemetry.statement._scope"
    ]
    assert private_imports_across_apps("import telemetry._hidden\n", "portal") == ["telemetry._hidden"]
    assert private_imports_across_apps("def f():\n    from telemetry._x import y\n", "alerts") == ["telemetry._x"]
    assert private_imports_across_apps("from telemetry.statement import _scope\n", "telemetry") == []
    assert private_imports_across_apps("from django.db import _x\nfrom __future__ import annotations\n", "x") == []


def test_no_app_imports_a_private_name_of_another():
    offenders = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for name in private_imports_across_apps(path.read_text(encoding="utf-8"), app):
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
