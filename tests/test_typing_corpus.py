"""mypy and pyright accept the DSL as the README writes it and flag real mistakes.

``tests/typing_corpus/`` holds correct files (zero errors from either checker) and
``mistakes.py``, whose every line marked ``# mistake:`` must be flagged by both checkers
and no other line.  The README's ``python`` code blocks, joined in order into one module
(later blocks use names the earlier ones define), must type-check with zero errors too.
Each checker runs once over all of it, with its default settings (pyright: basic).
"""

from __future__ import annotations

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


def readme_module() -> str:
    """The README's python blocks joined into one module (each block's lines kept apart)."""
    blocks = FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert blocks, "the README has no python code block"
    return "\n".join(f"# --- README block {n}\n{block}" for n, block in enumerate(blocks, 1))


@pytest.fixture(scope="module")
def checked_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    work = tmp_path_factory.mktemp("typing")
    files = {path.name: work / path.name for path in CORPUS.glob("*.py")}
    for name, target in files.items():
        shutil.copyfile(CORPUS / name, target)
    files["readme_blocks.py"] = work / "readme_blocks.py"
    files["readme_blocks.py"].write_text(readme_module(), encoding="utf-8")
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
    return _lines_flagged(result.stdout, r"^(?P<file>[^\s:]+\.py):(?P<line>\d+): error:")


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
    assert "readme_blocks.py" in correct and len(correct) >= 2
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
