"""Apply each hand-made mutation (catalogue.py) in a throwaway git worktree and run the tests that pin it.

    .venv/bin/python tests/mutations/run.py            # every mutation
    .venv/bin/python tests/mutations/run.py M1 M4      # some of them
    .venv/bin/python tests/mutations/run.py --list

The shared checkout is never written to: the worktree is HEAD (what is committed) under /tmp, with the
pinning test files copied in from the checkout (so a test not yet committed can be tried), and it is
removed at the end. Per mutation: the named tests run once unmutated (they must pass, else the row says
"baseline fails"; mutations naming the same tests share that run), then with the one edit applied; a failing run is "caught". The edit must match its file
exactly once, so a mutation whose line moved says "stale" instead of passing silently. Tests marked
`redis` need REDIS_URL (see docs/testing.md). Exit status 1 when any mutation survived or is stale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from catalogue import MUTATIONS, Mutation  # noqa: E402 - beside this script, not a package import


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _pytest(tree: Path, nodes: tuple[str, ...]) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
           "--no-header", "-rN", "--tb=line", *nodes]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def _first_failure(out: str) -> str:
    """The assertion line pytest printed for the first failure (--tb=line), else its last line."""
    for line in out.splitlines():
        if line.startswith("E ") or (line.startswith("/") and ": " in line):
            return line.strip()[:200]
    lines = [x for x in out.splitlines() if x.strip()]
    return lines[-1][:200] if lines else ""


def _overlay(tree: Path, m: Mutation) -> None:
    """Copy the checkout's versions of the pinning test files (and their folder's helpers named in
    `m.support`) into the worktree."""
    for rel in {n.split("::")[0] for n in m.tests} | set(m.support):
        src = ROOT / rel
        if src.exists():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / rel)


_BASELINES: dict[tuple[str, ...], tuple[int, str]] = {}


def run_one(tree: Path, m: Mutation) -> tuple[str, str]:
    _overlay(tree, m)
    target = tree / m.path
    if not target.exists():
        return "stale", f"{m.path} is not in this commit"
    original = target.read_text()
    edits = ((m.old, m.new), *m.also)
    mutated = original
    for old, new in edits:
        if mutated.count(old) != 1:
            return "stale", f"the text to mutate occurs {mutated.count(old)} times in {m.path}"
        mutated = mutated.replace(old, new, 1)
    # Mutations pinned by the same tests share one unmutated run (the worktree is HEAD throughout).
    if m.tests not in _BASELINES:
        _BASELINES[m.tests] = _pytest(tree, m.tests)
    rc, out = _BASELINES[m.tests]
    if rc != 0:
        return "baseline fails", _first_failure(out)
    target.write_text(mutated)
    try:
        rc, out = _pytest(tree, m.tests)
    finally:
        target.write_text(original)
    if rc != 0:
        return "caught", _first_failure(out)
    return ("equivalent", m.equivalent) if m.equivalent else ("SURVIVED", "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ids", nargs="*", help="mutation ids (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument(
        "--rev", default="HEAD", help="the commit to mutate (default HEAD; another when HEAD is mid-change)"
    )
    a = ap.parse_args()
    chosen = [m for m in MUTATIONS if not a.ids or m.id in a.ids]
    if a.list:
        for m in chosen:
            print(f"{m.id:5} {m.path:40} {m.protection}")
        return 0
    # A SIGTERM (a CI timeout) unwinds through the finally below, so the worktree is still removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tree = Path(tempfile.mkdtemp(prefix="mut-", dir="/tmp")) / "tree"
    _git("worktree", "add", "--detach", str(tree), a.rev)
    rows: list[tuple[Mutation, str, str]] = []
    try:
        for m in chosen:
            verdict, why = run_one(tree, m)
            rows.append((m, verdict, why))
            print(f"{m.id:5} {verdict:14} {m.protection}\n      {why}", flush=True)
    finally:
        _git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tree.parent, ignore_errors=True)
    caught = sum(v == "caught" for _, v, _ in rows)
    equivalent = sum(v == "equivalent" for _, v, _ in rows)
    print(f"\n{caught} of {len(rows)} mutations caught, {equivalent} equivalent (survive by design, see catalogue.py)")
    return 0 if caught + equivalent == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
