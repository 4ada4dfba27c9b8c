"""Packaging, CI and project standards: what a fresh clone needs to install, run and stay clean."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import onnx
import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11; CI runs 3.11

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def readme_commands() -> list[str]:
    """The shell commands of the README's ```bash blocks."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_quick_start_has_demo_and_test_commands() -> None:
    commands = readme_commands()
    assert any(c.startswith("python3 -m pip install -e .") and c.endswith("onnxquill demo") for c in commands)
    assert any("pytest" in c for c in commands)


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = next(c for c in readme_commands() if "pytest" in c)
    script = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in script.splitlines()]
    assert test_command in lines, f"{test_command!r} is not a line of .ci/run"
    assert lines[0].startswith("#!") and "bash" in lines[0]
    assert "set -euo pipefail" in lines
    assert os.access(ROOT / ".ci" / "run", os.X_OK), ".ci/run must be executable"


def _packages_on_disk() -> set[str]:
    found = set()
    for init in ROOT.glob("*/**/__init__.py"):
        relative = init.parent.relative_to(ROOT)
        if relative.parts[0] in {"tests", "bench", "notebooks", "build"} or any(p.startswith(".") for p in relative.parts):
            continue
        found.add(".".join(relative.parts))
    return found


def test_pyproject_lists_every_package() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == _packages_on_disk()


def test_version_matches_package() -> None:
    import dsl

    assert PYPROJECT["project"]["version"] == dsl.__version__


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("wheel")
    build_dir = tmp_path_factory.mktemp("source")
    # Build from a copy of what the wheel needs, so the checkout gets no build/ or egg-info.
    source = build_dir / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for top in {p.split(".")[0] for p in PYPROJECT["tool"]["setuptools"]["packages"]}:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(target), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (found,) = target.glob("onnxquill-*.whl")
    return found


def test_wheel_ships_packages_typing_marker_and_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    for package in _packages_on_disk():
        assert package.replace(".", "/") + "/__init__.py" in names, package
    for package in ("dsl", "converter", "eager"):
        assert f"{package}/py.typed" in names
    assert "onnxquill = converter.cli:main" in entry_points
    for requirement in ("onnx", "numpy", "onnxruntime", "ml_dtypes"):
        assert f"Requires-Dist: {requirement}" in metadata
    assert not any(n.startswith("tests/") for n in names)


def test_editable_install_is_a_path_file_that_type_checkers_follow(tmp_path: Path) -> None:
    """``pip install -e .`` must put the checkout on sys.path with a plain path file: mypy
    and pyright read those, but not setuptools' import-hook finder."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for top in {p.split(".")[0] for p in PYPROJECT["tool"]["setuptools"]["packages"]}:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "wheel"
    target.mkdir()
    build = f"import setuptools.build_meta as b; print(b.build_editable({str(target)!r}))"
    subprocess.run([sys.executable, "-c", build], cwd=source, check=True, capture_output=True)
    (found,) = target.glob("onnxquill-*.whl")
    with zipfile.ZipFile(found) as archive:
        path_files = {n: archive.read(n).decode().split() for n in archive.namelist() if n.endswith(".pth")}
        finders = [n for n in archive.namelist() if "finder" in n]
    assert list(path_files.values()) == [[str(source)]] and not finders


def _run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    return result.stdout.strip()


def test_import_dsl_does_not_load_onnxruntime() -> None:
    loaded = _run_python(
        "import sys, dsl; from dsl import script, FLOAT, opset18; "
        "print(sorted(m for m in ('onnxruntime', 'torch', 'onnxscript', 'converter.to_onnx') if m in sys.modules))"
    )
    assert loaded == "[]"


# What a repository tracks outside tests/data/: source, docs, configuration.  A wheel,
# archive, pickle, compiled library or model there is a build artefact or a download.
_ARTEFACT = re.compile(r"\.(whl|egg|tar|gz|bz2|xz|zip|7z|pkl|pickle|npz|npy|onnx|pb|so|dylib|dll|pyd|exe|o|a|pyc)$")


def _tracked_artefacts(paths: list[str]) -> list[str]:
    return [p for p in paths if not p.startswith("tests/data/") and _ARTEFACT.search(p.lower())]


def test_no_binary_or_build_artefact_is_tracked_outside_test_data() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing is tracked")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert _tracked_artefacts([p for p in tracked.split("\0") if p]) == []
    # and the rule itself sees one: the wheel that once sat at the root
    assert _tracked_artefacts(["py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl", "tests/data/m.onnx", "dsl/ir.py"]) == [
        "py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl"
    ]


def test_command_line_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "converter.cli", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "demo" in result.stdout


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:]


@pytest.mark.timeout(900)  # a cold mypy run on a loaded machine may take minutes
def test_mypy_is_clean() -> None:
    # The packages ship py.typed, so their annotations are a promise; [tool.mypy] in
    # pyproject.toml holds the settings (and the few untyped third-party modules).
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "dsl", "converter", "eager"], cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_demo_command_runs_and_matches_numpy() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "converter.cli", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "ir_version: 8" in result.stdout  # the printed ONNX text of the layer_norm model
    assert "onnxruntime: loaded and ran" in result.stdout and "eager call" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("OK:")


def test_readme_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python blocks run in order; the error example prints what the README shows.

    The markup example's XML block is written to ``my-project/model.agr`` first, so the
    Python block that exports it runs on exactly the markup the README shows.
    """
    from dsl import DslError

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    checked_error = False
    for index, (language, code) in enumerate(blocks):
        if language == "xml":
            project = tmp_path / "my-project"
            project.mkdir(exist_ok=True)
            (project / "model.agr").write_text(code)
            continue
        if language != "python":
            continue
        path = tmp_path / f"readme_block_{index}.py"
        path.write_text(code)
        try:
            exec(compile(code, str(path), "exec"), namespace)
        except DslError as error:
            shown = blocks[index + 1][1]  # the README's rendering of this error follows the code
            assert str(error).split(": error: ", 1)[1].strip() == shown.split(": error: ", 1)[1].strip()
            checked_error = True
    assert checked_error
    assert (tmp_path / "model.onnx").exists()  # the markup example exported its model


def test_compile_speed_bench_runs() -> None:
    """A smoke run of the benchmark at toy sizes, so the script cannot rot unnoticed."""
    result = subprocess.run(
        [sys.executable, "bench/compile_speed.py", "--repeats", "2", "--sizes", "50", "--import-repeats", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert any(r.startswith("| compile layer_norm (ms) | ") for r in rows)
    assert any(r.startswith("| to_model_proto, 50 statements (µs/node) | ") for r in rows)
    assert any(r.startswith("| import dsl (ms, ratio to onnx) | ") for r in rows)
    assert "n/a" not in next(r for r in rows if r.startswith("| compile layer_norm")).split("|")[2]


def test_compose_speed_bench_runs() -> None:
    """A smoke run of the composition benchmark at toy sizes."""
    result = subprocess.run(
        [sys.executable, "bench/compose_speed.py", "--sizes", "30", "60", "--repeats", "1", "--min-seconds", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert any(r.startswith("| 30 | ") for r in rows) and any(r.startswith("| 60 | ") for r in rows)
    assert "nan" not in result.stdout
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    for model in ("light_squeezenet.onnx", "light_resnet50.onnx", "light_inception_v2.onnx", "light_densenet121.onnx"):
        shipped = os.path.exists(os.path.join(light, model))
        assert any(r.startswith(f"| {model} (") for r in rows) == shipped, model
