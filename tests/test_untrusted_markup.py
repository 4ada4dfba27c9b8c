"""Hostile markup projects: nothing outside the project is read, written or printed, and
no small file makes the compiler spend unbounded memory or time (dsl.markup, dsl.limits).

Each test builds the project in a temporary folder, with a "secret" outside it, and
compiles or exports it in a child process under memory and time limits
(:mod:`tests.untrusted_run`).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.untrusted_run import assert_refused, run_limited

SECRET = "SECRET-7f3a-do-not-print"
RELU_BLOCK = (
    '<block title="B"{attributes}><import from="x"/><node title="R" op="Relu"><input src="x"/>'
    '<output name="y"/></node><export from="y"/></block>'
)
IMPORTED = (
    '<model script-version="0.0.1"><import from="a"/><block title="I"><import from="a"/>'
    '<node title="N" op="Neg"><input src="a"/><output name="b"/></node><export from="b"/></block>'
    '<export from="b"/></model>'
)


def _model(blocks: str, output: str = "y", param: str = "") -> str:
    return (
        f'<model script-version="0.0.1"><import dim="[2]" from="x" type="float32"/>{blocks}{param}'
        f'<export dim="[2]" from="{output}" type="float32"/></model>'
    )


def _project(tmp_path: Path, text: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.agr").write_text(text, encoding="utf-8")
    return project


def _numbered_project(tmp_path: Path, index: int, blocks: str) -> Path:
    folder = tmp_path / str(index)
    folder.mkdir()
    return _project(folder, _model(blocks))


def _outside(tmp_path: Path, name: str, text: str) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    path = outside / name
    path.write_text(text, encoding="utf-8")
    return path


def _compile_calls(project: Path, *labels_and_options: tuple[str, str]) -> str:
    lines = ["from dsl.markup import to_model_proto, export"]
    for label, call in labels_and_options:
        lines.append(f"attempt({label!r}, lambda: {call})")
    return "\n".join(lines).replace("PROJECT", repr(str(project)))


# ----------------------------------------------------------------- reading outside


def test_block_src_outside_the_project_is_refused_without_showing_it(tmp_path: Path) -> None:
    valid_outside = _outside(tmp_path, "evil.agr", IMPORTED)  # (imported silently before)
    secret_outside = _outside(tmp_path, "secret.agr", SECRET + "\n")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "linked.agr").symlink_to(secret_outside)
    cases = {
        "parent": "../outside/evil.agr",
        "absolute": str(valid_outside),
        "proc": "/proc/self/environ",
        "symlink": "linked.agr",
        "secret": "../outside/secret.agr",
    }
    calls = []
    for label, src in cases.items():
        folder = tmp_path / label
        folder.mkdir()
        project = _project(folder, _model(f'<block src="{src}" name="e"><import from="x"/></block>', "e$b"))
        if label == "symlink":
            (project / "linked.agr").symlink_to(secret_outside)
        calls.append((label, f"to_model_proto({str(project)!r})"))
    results = run_limited(_compile_calls(tmp_path, *calls), tmp_path, {"ONNXQUILL_TEST_TOKEN": SECRET})
    for label in cases:
        assert_refused(results[label], "UnsafePathError", not_shown=(SECRET,))


def test_a_block_src_inside_the_project_still_imports(tmp_path: Path) -> None:
    project = _project(tmp_path, _model('<block src="parts/inner.agr" name="e"><import from="x"/></block>', "e$b"))
    (project / "parts").mkdir()
    (project / "parts" / "inner.agr").write_text(IMPORTED, encoding="utf-8")
    results = run_limited(_compile_calls(project, ("inside", "[n.op_type for n in to_model_proto(PROJECT).graph.node]")),
                          tmp_path)
    assert results["inside"]["type"] is None and "'Neg'" in results["inside"]["value"], results["inside"]


def test_planted_links_to_meta_architecture_and_weights_are_not_read(tmp_path: Path) -> None:
    secret = _outside(tmp_path, "secret.txt", SECRET + "\n{")
    outside_weights = tmp_path / "outside" / "w.npz"
    np.savez(outside_weights, W=np.full((2,), 7.0, np.float32))
    cases = {"meta": ("meta.json", secret), "architecture": ("other.agr", secret),
             "npz": ("weights.npz", outside_weights), "pkl": ("weights.pkl", secret)}
    calls = []
    for label, (name, target) in cases.items():
        folder = tmp_path / label
        folder.mkdir()
        project = _project(folder, _model(RELU_BLOCK.format(attributes="")))
        if label == "architecture":
            (project / "model.agr").unlink()
        (project / name).symlink_to(target)
        calls.append((label, f"to_model_proto({str(project)!r})"))
    results = run_limited(_compile_calls(tmp_path, *calls), tmp_path)
    for label in cases:
        assert_refused(results[label], "UnsafePathError", not_shown=(SECRET,))


# ----------------------------------------------------------------- writing through links


@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling link"])
def test_export_does_not_write_through_a_planted_weights_link(tmp_path: Path, dangling: bool) -> None:
    target = tmp_path / "outside" / "victim.txt"
    if not dangling:
        _outside(tmp_path, "victim.txt", "untouched")
    else:
        (tmp_path / "outside").mkdir()
    param = ('<block title="P"><import from="x"/><node title="A" op="Add"><input src="x"/>'
             '<params dim="[2]" name="W"/><output name="y"/></node><export from="y"/></block>')
    project = _project(tmp_path, _model(param))
    (project / "weights.npz").symlink_to(target)
    out = tmp_path / "model.onnx"
    results = run_limited(_compile_calls(project, ("export", f"export(PROJECT, {str(out)!r}, reinit=True)")), tmp_path)
    assert_refused(results["export"], "UnsafePathError")
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "untouched"


def test_export_does_not_write_the_model_through_a_planted_link(tmp_path: Path) -> None:
    victim = _outside(tmp_path, "victim.txt", "untouched")
    project = _project(tmp_path, _model(RELU_BLOCK.format(attributes="")))
    out = tmp_path / "model.onnx"
    out.symlink_to(victim)
    results = run_limited(_compile_calls(project, ("export", f"export(PROJECT, {str(out)!r})")), tmp_path)
    assert_refused(results["export"], "UnsafePathError")
    assert victim.read_text() == "untouched"


# ----------------------------------------------------------------- bounded work


def test_repetition_and_parameter_sizes_are_bounded_before_the_work(tmp_path: Path) -> None:
    nested = RELU_BLOCK.format(attributes=' rep="1000"').replace(
        '<node title="R"', '<block title="C" rep="1000"><import from="x"/><node title="R"'
    ).replace('<export from="y"/></block>', '<export from="y"/></block><export from="y"/></block>', 1)
    param = ('<block title="P"><import from="x"/><node title="A" op="Add"><input src="x"/>'
             '<params dim="{dims}" name="W"/><output name="y"/></node><export from="y"/></block>')
    cases = {
        "expr rep": (RELU_BLOCK.format(attributes=' rep="expr(10^9)"'), "LimitExceededError"),
        "rep": (RELU_BLOCK.format(attributes=' rep="1000000"'), "LimitExceededError"),
        "stretch": (RELU_BLOCK.format(attributes=' stretch="1000000"'), "LimitExceededError"),
        "nested rep": (nested, "LimitExceededError"),
        "huge param": (param.format(dims="[100000, 100000, 100000]"), "LimitExceededError"),
        "65 dims": (param.format(dims="[" + ", ".join(["1"] * 65) + "]"), "MarkupError"),
    }
    calls = [(label, f"to_model_proto({str(_numbered_project(tmp_path, index, blocks))!r})")
             for index, (label, (blocks, _)) in enumerate(cases.items())]
    results = run_limited(_compile_calls(tmp_path, *calls), tmp_path, timeout=60)
    for label, (_, error_type) in cases.items():
        assert_refused(results[label], error_type)
        if error_type == "LimitExceededError":
            assert "ONNXQUILL_MARKUP_NODES" in results[label]["hint"] or "ONNXQUILL_TENSOR_BYTES" in results[label]["hint"]


def test_raising_the_limit_lets_a_larger_repetition_through(tmp_path: Path) -> None:
    project = _project(tmp_path, _model(RELU_BLOCK.format(attributes=' rep="50"')))
    code = _compile_calls(project, ("default", "len(to_model_proto(PROJECT).graph.node)"))
    code += "\nimport dsl\nwith dsl.raised_limits(markup_nodes=1000):\n"
    code += f"    attempt('raised', lambda: len(to_model_proto({str(project)!r}).graph.node))\n"
    results = run_limited(code, tmp_path, {"ONNXQUILL_MARKUP_NODES": "40"})
    assert_refused(results["default"], "LimitExceededError")
    assert results["raised"] == {"label": "raised", "type": None, "value": "50"}


def test_expressions_that_would_exhaust_python_are_markup_errors(tmp_path: Path) -> None:
    param = ('<block title="P"><import from="x"/><node title="A" op="Add"><input src="x"/>'
             '<params dim="[{dim}]" name="W"/><output name="y"/></node><export from="y"/></block>')
    cases = {
        "too large to print": param.format(dim="expr(2^4000 * 2^4000 * 2^4000)"),
        "nested parentheses": param.format(dim="expr(" + "(" * 100_000 + "2" + ")" * 100_000 + ")"),
        "nested signs": param.format(dim="expr(" + "-" * 100_000 + "2)"),
        "nested lists": param.format(dim="[" * 100_000 + "]" * 100_000),
        "many digits": param.format(dim="expr(" + "9" * 5000 + ")"),
    }
    calls = [(label, f"to_model_proto({str(_numbered_project(tmp_path, index, blocks))!r})")
             for index, (label, blocks) in enumerate(cases.items())]
    results = run_limited(_compile_calls(tmp_path, *calls), tmp_path)
    for label in cases:
        assert_refused(results[label], "MarkupError")


def test_a_one_line_file_of_many_tags_parses_in_linear_time(tmp_path: Path) -> None:
    """40 000 tags on one line took more than a minute (each position decoded the line from
    its start); the child's time limit is what this asserts."""
    nodes = "".join(f'<node title="N{i}" op="Relu"><input src="{"x" if i == 0 else f"y{i - 1}"}"/>'
                    f'<output name="y{i}"/></node>' for i in range(10_000))
    blocks = f'<block title="B"><import from="x"/>{nodes}<export from="y9999"/></block>'
    path = tmp_path / "wide.agr"
    path.write_text(_model(blocks, "y9999"), encoding="utf-8")
    code = f"from dsl.markup.document import parse_document\nattempt('parse', lambda: len(parse_document({str(path)!r}).children))"
    results = run_limited(code, tmp_path, timeout=30)
    assert results["parse"]["type"] is None, results["parse"]


# ----------------------------------------------------------------- weights files


def _deep_list_pickle(depth: int) -> bytes:
    """{"w": [[[...]]]} nested ``depth`` deep, written opcode by opcode (pickle.dumps recurses)."""
    return b"\x80\x02}X\x01\x00\x00\x00w" + b"]" * depth + b"a" * (depth - 1) + b"s."


def test_pickled_weights_that_expand_or_recurse_are_refused_fast(tmp_path: Path) -> None:
    shared: list = [1.0, 1.0]
    for _ in range(33):
        shared = [shared, shared]  # 2**34 floats from a few hundred bytes of memo references
    looped: list = []
    looped.append(looped)
    payloads = {
        "memo bomb": (pickle.dumps({"W": shared}, protocol=2), "LimitExceededError"),
        "self reference": (pickle.dumps({"W": looped}, protocol=2), "MarkupError"),
        "ragged": (pickle.dumps({"W": [[1.0, 2.0], [3.0]]}, protocol=2), "MarkupError"),
        "100 000 deep": (_deep_list_pickle(100_000), "MarkupError"),
    }
    assert len(payloads["memo bomb"][0]) < 1000
    calls = []
    for label, (payload, _) in payloads.items():
        path = tmp_path / label.replace(" ", "_") / "weights.pkl"
        path.parent.mkdir()
        path.write_bytes(payload)
        calls.append((label, f"load_pickled_weights(Path({str(path)!r}))"))
    code = "from pathlib import Path\nfrom dsl.markup.weights import load_pickled_weights\n" + "\n".join(
        f"attempt({label!r}, lambda: {call})" for label, call in calls)
    results = run_limited(code, tmp_path, timeout=30)
    for label, (_, error_type) in payloads.items():
        assert_refused(results[label], error_type)


def test_a_rectangular_pickled_list_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "weights.pkl"
    path.write_bytes(pickle.dumps({"W": [[1.0, 2.0], [3.0, 4.0]]}, protocol=2))
    code = f"from pathlib import Path\nfrom dsl.markup.weights import load_pickled_weights\nattempt('ok', lambda: load_pickled_weights(Path({str(path)!r}))['W'].tolist())"
    assert run_limited(code, tmp_path)["ok"]["value"] == "[[1.0, 2.0], [3.0, 4.0]]"


def test_a_compressed_npz_is_checked_against_the_limit_before_inflating(tmp_path: Path) -> None:
    path = tmp_path / "weights.npz"
    np.savez_compressed(path, W=np.zeros(4_000_000, np.float64))  # 32 MB of zeros in ~30 KB
    assert os.path.getsize(path) < 200_000
    code = f"""
        import dsl
        from dsl.weights_file import read_weights_file
        attempt("default", lambda: read_weights_file({str(path)!r}))
        with dsl.raised_limits(inflated_bytes=10**8):
            attempt("raised", lambda: read_weights_file({str(path)!r})["W"].shape)
    """
    results = run_limited(code, tmp_path, {"ONNXQUILL_INFLATED_BYTES": "1000000"})
    assert_refused(results["default"], "LimitExceededError")
    assert results["raised"]["value"] == "(4000000,)"


def _read_each(tmp_path: Path, paths: dict[str, Path]) -> dict[str, dict]:
    code = "from dsl.weights_file import read_weights_file\n" + "\n".join(
        f"attempt({label!r}, lambda: read_weights_file({str(path)!r}))" for label, path in paths.items())
    results = run_limited(code, tmp_path)
    assert len(results) == len(paths)
    return results


def test_dtype_entries_that_name_no_ml_dtype_are_weights_file_errors(tmp_path: Path) -> None:
    """(bfloat16 is a real ml_dtypes type, but not of the stored item size, uint32.)"""
    entries = ['{"W": "finfo"}', '{"W": "__class__"}', '{"W": "float32"}', '{"W": 3}', "[" * 100_000 + "]" * 100_000,
               '{"W": "bfloat16"}']
    paths = {}
    for index, dtypes in enumerate(entries):
        paths[dtypes[:20]] = tmp_path / f"{index}.npz"
        np.savez(paths[dtypes[:20]], W=np.zeros(2, np.uint32), __dtypes__=np.array(dtypes))
    for outcome in _read_each(tmp_path, paths).values():
        assert_refused(outcome, "WeightsFileError")

def _npy_member(shape: str, data: bytes) -> bytes:
    """An ``.npy`` member whose header declares ``shape`` (written by hand: numpy writes only true ones)."""
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}".encode("latin1")
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data


def test_npy_headers_with_impossible_shapes_are_weights_file_errors(tmp_path: Path) -> None:
    """(A shape of (-1,) was read as whatever the member held.)"""
    shapes = ["(-1,)", "(3, -2)", "(" + "1, " * 65 + ")", f"({2**70},)", f"({2**40}, {2**40})"]
    paths = {}
    for index, shape in enumerate(shapes):
        paths[shape[:20]] = tmp_path / f"{index}.npz"
        with zipfile.ZipFile(paths[shape[:20]], "w") as archive:
            archive.writestr("W.npy", _npy_member(shape, bytes(64)))
    for outcome in _read_each(tmp_path, paths).values():
        assert_refused(outcome, "WeightsFileError")
