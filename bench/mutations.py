"""Mutation check of the test suite: plant one small bug at a time and see a test fail.

Each mutation replaces one snippet of text, found by its content (never by line number,
so it survives edits elsewhere in the file), in a temporary copy of the project; then
the tests that should notice run on that copy (a fast subset, stopping at the first
failure).  A mutation the tests do not notice *survives*: a gap in the suite.  The
project's own files are never edited.

    python bench/mutations.py              # every mutation, then the table
    python bench/mutations.py --only E1 C2 # some of them
    python bench/mutations.py --list       # the mutations, without running anything

Outcomes: ``killed`` (a test failed), ``killed (error)`` (the tests could not even be
collected: an import or syntax error, which no user would miss either), ``SURVIVED``,
``target not found`` (the snippet is not in the file, or not exactly once: the code moved
on and the mutation must be rewritten; never counted as killed).  Before the mutations,
each test subset runs once on the unmutated copy and must pass.  The exit status is 1
when a mutation survived or lost its target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.mutation_cases import BASE_MUTATIONS, Mutation  # noqa: E402 (after the path)
from bench.mutation_checks import CHECK_MUTATIONS  # noqa: E402

MUTATIONS = [*BASE_MUTATIONS, *CHECK_MUTATIONS]

def _copy_tree(destination: Path) -> Path:
    ignore = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".*_cache", ".hypothesis", "*.egg-info", "build")
    tree = destination / "tree"
    shutil.copytree(ROOT, tree, ignore=ignore)
    return tree


def _run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[int, str, float]:
    present = [t for t in tests if (tree / t).exists()]
    missing = sorted(set(tests) - set(present))
    if missing:
        return 4, f"test files not found: {missing}", 0.0
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--timeout=300", *present]
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    started = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return 1, "the test subset ran past 900 s", time.perf_counter() - started
    lines = (result.stdout + result.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:1]
    return result.returncode, " ".join([*failed, lines[-1] if lines else ""]), time.perf_counter() - started


def _apply(tree: Path, mutation: Mutation) -> str | None:
    """Write the mutated file; the original text, or None when the target is missing or not unique."""
    path = tree / mutation.path
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    if text.count(mutation.old) != 1:
        return None
    path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
    return text


def _outcome(code: int) -> str:
    if code == 0:
        return "SURVIVED"
    if code == 1:
        return "killed"
    return "killed (error)"  # 2: collection error or interrupted; 3: internal error; 4: usage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="run these mutation keys only")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only is None or m.key in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.key:4} {m.path:38} {m.what}")
        return 0
    rows: list[tuple[str, str, str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="onnxquill-mutations-") as folder:
        tree = _copy_tree(Path(folder))
        for tests in sorted({m.tests for m in chosen}):
            code, last, seconds = _run_tests(tree, tests)
            print(f"baseline {' '.join(Path(t).stem for t in tests)}: {last} ({seconds:.0f} s)", flush=True)
            if code != 0:
                print("the unmutated tests fail: fix them before judging mutations", file=sys.stderr)
                return 2
        for mutation in chosen:
            original = _apply(tree, mutation)
            if original is None:
                rows.append((mutation.key, mutation.what, "target not found", "", 0.0))
                print(f"{mutation.key}: target not found in {mutation.path}", flush=True)
                continue
            try:
                code, last, seconds = _run_tests(tree, mutation.tests)
            finally:
                (tree / mutation.path).write_text(original, encoding="utf-8")
            outcome = "test files missing" if code == 4 else _outcome(code)
            rows.append((mutation.key, mutation.what, outcome, last, seconds))
            print(f"{mutation.key}: {outcome} ({seconds:.0f} s) {last}", flush=True)
    _print_table(rows)
    bad = [r for r in rows if r[2] in ("SURVIVED", "target not found", "test files missing")]
    return 1 if bad else 0


def _print_table(rows: list[tuple[str, str, str, str, float]]) -> None:
    print()
    print(f"{'key':5}| {'mutation':56}| {'outcome':17}| {'s':>4}")
    print("-" * 90)
    for key, what, outcome, _, seconds in rows:
        print(f"{key:5}| {what:56}| {outcome:17}| {seconds:4.0f}")
    killed = sum(r[2].startswith("killed") for r in rows)
    survived = sum(r[2] == "SURVIVED" for r in rows)
    missing = sum(r[2] == "target not found" for r in rows)
    print("-" * 90)
    print(f"{len(rows)} mutations: {killed} killed, {survived} survived, {missing} target not found")


if __name__ == "__main__":
    sys.exit(main())
