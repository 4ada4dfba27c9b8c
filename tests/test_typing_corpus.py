"""mypy and pyright accept the DSL as the README writes it and flag real mistakes.

``tests/typing_corpus/`` holds correct files (zero errors from either checker) and
``mistakes.py``, whose every line marked ``# mistake:`` must be flagged by both checkers
and no other line.  The README's ``python`` code blocks, each a module that imports what it uses from the blocks before it
(read as one session, as a reader would), must type-check with zero errors too,
but for the lines a README block marks ``# mistake:`` (the Errors section's example).
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
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


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


def readme_modules() -> dict[str, str]:
    """The README's python blocks, one module each; a name a block uses but an earlier block
    defines is imported from the newest such block (so blocks read as one session, without
    one block's ``x`` retyping another's)."""
    blocks = FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert blocks, "the README has no python code block"
    modules: dict[str, str] = {}
    defined_by: dict[str, str] = {}
    for number, block in enumerate(blocks, 1):
        tree = ast.parse(block)
        own = _defined_names(tree)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        module = f"readme_block_{number}"
        imports = [f"from {defined_by[name]} import {name}" for name in sorted(used - own) if name in defined_by]
        # the imports share the block's first line so that its line numbers stay the README block's
        modules[module] = "; ".join(imports) + "\n" + block if imports else "\n" + block
        defined_by.update(dict.fromkeys(own, module))
    return modules


@pytest.fixture(scope="module")
def checked_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    work = tmp_path_factory.mktemp("typing")
    files = {path.name: work / path.name for path in CORPUS.glob("*.py")}
    for name, target in files.items():
        shutil.copyfile(CORPUS / name, target)
    for module, text in readme_modules().items():
        files[f"{module}.py"] = work / f"{module}.py"
        files[f"{module}.py"].write_text(text, encoding="utf-8")
    return files


def _lines_flagged(output: str, pattern: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for match in re.finditer(pattern, output, re.MULTILINE):
        found.setdefault(pathlib.Path(match["file"]).name, set()).add(int(match["line"]))
    return found


@pytest.fixture(scope="module")
def mypy_errors(checked_files: dict[str, pathlib.Path]) -> dict[str, set[int]]:
    work = next(iter(checked_files.values())).parent
    (work / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")  # mypy's default settings
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(work / "mypy.ini"), "--cache-dir", str(work / "cache"),
         "--no-error-summary", *map(str, checked_files.values())],
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
def pyright_errors(checked_files: dict[str, pathlib.Path]) -> dict[str, set[int]]:
    command = _pyright_command()
    work = next(iter(checked_files.values())).parent
    config = {"typeCheckingMode": "basic", "extraPaths": [str(ROOT)], "pythonVersion": "3.10"}
    (work / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    result = subprocess.run(
        [*command, "--outputjson", "--project", str(work / "pyrightconfig.json"), *map(str, checked_files.values())],
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


def _correct_files(checked_files: dict[str, pathlib.Path]) -> list[str]:
    return sorted(name for name, path in checked_files.items() if not _marked_lines(path))


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_correct_files_and_readme_blocks_have_no_errors(
    checker: str, checked_files: dict[str, pathlib.Path], request: pytest.FixtureRequest
) -> None:
    errors = request.getfixturevalue(f"{checker}_errors")
    correct = _correct_files(checked_files)
    assert "correct_layers.py" in correct and sum(name.startswith("readme_block_") for name in correct) >= 5
    assert {name: sorted(errors[name]) for name in correct if name in errors} == {}


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_every_planted_mistake_is_flagged_on_its_own_line(
    checker: str, checked_files: dict[str, pathlib.Path], request: pytest.FixtureRequest
) -> None:
    errors = request.getfixturevalue(f"{checker}_errors")
    mistakes = {name: _marked_lines(path) for name, path in checked_files.items() if _marked_lines(path)}
    assert sum(map(len, mistakes.values())) >= 15
    for name, marked in mistakes.items():
        assert sorted(errors.get(name, set())) == sorted(marked), name


def test_corpus_runs() -> None:
    """The correct corpus is real code: it compiles, exports and runs eagerly."""
    for path in sorted(CORPUS.glob("*.py")):
        if not _marked_lines(path):
            subprocess.run([sys.executable, str(path)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           check=True, capture_output=True, timeout=300)
