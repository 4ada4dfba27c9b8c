"""mypy and pyright accept the DSL as the README writes it and flag real mistakes.

``tests/typing_corpus/`` holds correct files (zero errors from either checker) and
``mistakes.py``, whose every line marked ``# mistake:`` must be flagged by both checkers
and no other line.  The README's ``python`` code blocks, each a module that imports what it uses from the blocks before it
(read as one session, as a reader would), must type-check with zero errors too,
but for the line the Errors section's example shows in its rendered error.
Each checker runs once over all of it, with its default settings (pyright: basic).
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "typing_corpus"
MISTAKE = re.compile(r"#\s*mistake:")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _defined_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def readme_modules() -> dict[str, tuple[str, set[int]]]:
    """The README's python blocks, one module each, with the lines a checker must flag.

    A name a block uses but an earlier block defines is imported from the newest such block
    (so blocks read as one session without one block's ``x`` retyping another's).  A block
    followed by a rendered ``error:`` (the Errors section's example) must be flagged on
    exactly the line that rendering shows, and nowhere else.
    """
    blocks = FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert any(language == "python" for language, _ in blocks), "the README has no python code block"
    modules: dict[str, tuple[str, set[int]]] = {}
    defined_by: dict[str, str] = {}
    for index, (language, block) in enumerate(blocks):
        if language != "python":
            continue
        tree = ast.parse(block)
        own = _defined_names(tree)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        module = f"readme_block_{index}"
        imports = [f"from {defined_by[name]} import {name}" for name in sorted(used - own) if name in defined_by]
        text = "; ".join(imports) + "\n" + block  # the imports take one line: block line n is line n + 1
        following = blocks[index + 1][1] if index + 1 < len(blocks) else ""
        flagged = set()
        if ": error: " in following.partition("\n")[0]:
            shown = following.splitlines()[1].rstrip()
            flagged = {n for n, line in enumerate(text.splitlines(), 1) if line.rstrip() == shown}
            assert len(flagged) == 1, f"the error the README shows ({shown.strip()}) is not one line of its example"
        modules[module] = (text, flagged)
        defined_by.update(dict.fromkeys(own, module))
    return modules


@pytest.fixture(scope="module")
def checked_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[pathlib.Path, set[int]]]:
    """Each file to check, with the lines both checkers must flag (and no others)."""
    work = tmp_path_factory.mktemp("typing")
    files = {}
    for path in CORPUS.glob("*.py"):
        shutil.copyfile(path, work / path.name)
        files[path.name] = (work / path.name, _marked_lines(path))
    for module, (text, flagged) in readme_modules().items():
        (work / f"{module}.py").write_text(text, encoding="utf-8")
        files[f"{module}.py"] = (work / f"{module}.py", flagged)
    return files


def _lines_flagged(output: str, pattern: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for match in re.finditer(pattern, output, re.MULTILINE):
        found.setdefault(pathlib.Path(match["file"]).name, set()).add(int(match["line"]))
    return found


@pytest.fixture(scope="module")
def mypy_errors(checked_files: dict[str, tuple[pathlib.Path, set[int]]]) -> dict[str, set[int]]:
    paths = [str(path) for path, _ in checked_files.values()]
    work = pathlib.Path(paths[0]).parent
    (work / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")  # mypy's default settings
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(work / "mypy.ini"), "--cache-dir", str(work / "cache"),
         "--no-error-summary", *paths],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    # A third-party import without types (onnxruntime) is mypy's complaint about that
    # library, whatever the code around it; everything else counts.
    return _lines_flagged(result.stdout, r"^(?P<file>[^\s:]+\.py):(?P<line>\d+): error:(?!.*\[import-untyped\]$)")


def _pyright_command() -> list[str]:
    found = shutil.which("pyright")
    if found is None:
        pytest.skip("pyright is not installed (pip install pyright: the test extra)")
    probe = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:  # the pip wrapper fetches pyright's node package on first use
        pytest.skip(f"pyright cannot start here (it needs node and its npm package): {probe.stderr.strip()[:200]}")
    return [found]


@pytest.fixture(scope="module")
def pyright_errors(checked_files: dict[str, tuple[pathlib.Path, set[int]]]) -> dict[str, set[int]]:
    command = _pyright_command()
    paths = [str(path) for path, _ in checked_files.values()]
    work = pathlib.Path(paths[0]).parent
    config = {"typeCheckingMode": "basic", "extraPaths": [str(ROOT)], "pythonVersion": "3.10"}
    (work / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    result = subprocess.run(
        [*command, "--outputjson", "--project", str(work / "pyrightconfig.json"), *paths],
        cwd=work, capture_output=True, text=True, timeout=600,
    )
    report = json.loads(result.stdout)
    found: dict[str, set[int]] = {}
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            # pyright counts lines from 0
            found.setdefault(pathlib.Path(diagnostic["file"]).name, set()).add(diagnostic["range"]["start"]["line"] + 1)
    return found


def _marked_lines(path: pathlib.Path) -> set[int]:
    return {n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if MISTAKE.search(line)}


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_correct_files_and_readme_blocks_have_no_errors(
    checker: str, checked_files: dict[str, tuple[pathlib.Path, set[int]]], request: pytest.FixtureRequest
) -> None:
    errors = request.getfixturevalue(f"{checker}_errors")
    correct = sorted(name for name, (_, flagged) in checked_files.items() if not flagged)
    assert "correct_layers.py" in correct and sum(name.startswith("readme_block_") for name in correct) >= 5
    assert {name: sorted(errors[name]) for name in correct if name in errors} == {}


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_every_planted_mistake_is_flagged_on_its_own_line(
    checker: str, checked_files: dict[str, tuple[pathlib.Path, set[int]]], request: pytest.FixtureRequest
) -> None:
    errors = request.getfixturevalue(f"{checker}_errors")
    mistakes = {name: flagged for name, (_, flagged) in checked_files.items() if flagged}
    assert "mistakes.py" in mistakes and any(name.startswith("readme_block_") for name in mistakes)
    assert sum(map(len, mistakes.values())) >= 15
    for name, marked in mistakes.items():
        assert sorted(errors.get(name, set())) == sorted(marked), name


def test_corpus_runs() -> None:
    """The correct corpus is real code: it compiles, exports and runs eagerly."""
    for path in sorted(CORPUS.glob("*.py")):
        if not _marked_lines(path):
            subprocess.run([sys.executable, str(path)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           check=True, capture_output=True, timeout=300)
