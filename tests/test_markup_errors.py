"""The corpus of broken projects in tests/data/markup/broken: each fails with the exact error.

Every case names the error class, a fragment of the message, the file and the line the
error must point at; the rendered report must show that line with a caret under it.
Weight-file cases (a weight of the wrong shape, a pickle carrying code) are built here
because they are binary.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from dsl.errors import DslError, DslTypeError, MarkupError, OpAttributeError, OpCallError, UnknownOpError
from dsl.markup import export, to_model_proto

BROKEN = Path(__file__).parent / "data" / "markup" / "broken"
DATA = Path(__file__).parent / "data" / "markup"

# case, error class, message fragment, file (relative to the case), line
CASES = [
    ("attribute_wrong_kind", MarkupError, "attribute axis must be an integer, got [0, 1]", "model.agr", 5),
    ("bad_expression", MarkupError, "expected a number, a name or '('", "model.agr", 2),
    ("bad_init_args", MarkupError, "init_args of init 'normal' must be 2 numbers", "model.agr", 7),
    ("bad_rep", MarkupError, "rep must be an integer, got 1.5", "model.agr", 3),
    ("block_import_undefined", MarkupError, "the block imports 'hidden', which nothing defines", "model.agr", 4),
    ("duplicate_output", MarkupError, "'y' is already defined", "model.agr", 11),
    ("export_undefined", MarkupError, "the block exports 'z', which nothing in it defines", "model.agr", 9),
    ("import_cycle", MarkupError, "import cycle: model.agr -> a.agr -> b.agr -> a.agr", "parts/b.agr", 3),
    ("import_without_name", MarkupError, "an imported block needs a name", "model.agr", 3),
    ("input_type_mismatch", DslTypeError, "must have the same element type, got FLOAT and INT64", "model.agr", 6),
    ("malformed_xml", MarkupError, "malformed XML: mismatched tag", "model.agr", 5),
    ("missing_imported_file", MarkupError, "nowhere.agr' does not exist", "model.agr", 3),
    ("missing_required_attribute", OpAttributeError, "Concat requires attribute axis", "model.agr", 5),
    ("node_without_output", MarkupError, "node 'A' has no <output>", "model.agr", 5),
    ("output_type_mismatch", MarkupError, "Relu gives FLOAT here, but type says INT64", "model.agr", 7),
    ("rep_and_stretch", MarkupError, "a block cannot have both rep and stretch", "model.agr", 3),
    ("root_not_model", MarkupError, "the root tag is <network>, not <model>", "model.agr", 1),
    ("shape_inference_failure", MarkupError, "parameter 'W$1' has dim [4, 5], which does not fit", "model.agr", 7),
    ("shared_name_flag", MarkupError, "shared must be 'yes' or 'no', got 'true'", "model.agr", 7),
    ("shared_param_conflict", MarkupError, "shared parameter 'b' is FLOAT[2]", "model.agr", 12),
    ("text_in_markup", MarkupError, "text 'relu here' is not allowed", "model.agr", 3),
    ("too_many_inputs", OpCallError, "Relu takes 1 input, got 2", "model.agr", 5),
    ("undefined_input", MarkupError, "'xx' is not defined here", "model.agr", 6),
    ("undefined_var", MarkupError, "undefined variable 'width'", "model.agr", 2),
    ("unknown_block_attribute", MarkupError, "<block> has no attribute 'reps'", "model.agr", 3),
    ("unknown_init", MarkupError, "unknown init 'gaussian'", "model.agr", 7),
    ("unknown_op", UnknownOpError, "has no op 'Rleu'", "model.agr", 5),
    ("unknown_op_attribute", OpAttributeError, "Relu has no attribute 'alpha'", "model.agr", 5),
    ("unknown_tag", MarkupError, "unknown tag <nod> inside <block>", "model.agr", 5),
    ("unknown_type", MarkupError, "unknown element type 'float33'", "model.agr", 2),
    ("unwritable_attribute", MarkupError, "then_branch is a graph attribute", "model.agr", 5),
    ("omitted_required_input", MarkupError, "input 2 of MatMul (B) is required", "model.agr", 7),
    ("empty_param_name", MarkupError, "<params> has an empty name", "model.agr", 7),
    ("no_export", MarkupError, "the model has no <export>", "model.agr", 1),
    ("bad_opset", MarkupError, "the installed onnx knows opsets up to", "model.agr", 1),
    ("wrong_declared_dim", MarkupError, "declared with dim [2, 3], but ONNX shape inference gives [2, 5]", "model.agr", 8),
]


def test_every_broken_project_is_listed() -> None:
    listed = {case[0] for case in CASES} | {"two_architecture_files"}
    assert listed == {p.name for p in BROKEN.iterdir() if p.is_dir()}


TOLERATED = {"export_undefined", "unknown_block_attribute"}  # (see tests/test_markup_tolerated.py)


@pytest.mark.parametrize(("case", "error_class", "fragment", "file", "line"), CASES, ids=[c[0] for c in CASES])
def test_broken_project(case: str, error_class: type, fragment: str, file: str, line: int) -> None:
    with pytest.raises(DslError) as caught:
        # (what Agrippa tolerated is a warning by default: strict=True makes it the error)
        to_model_proto(BROKEN / case, seed=0, strict=case in TOLERATED)
    error = caught.value
    assert type(error) is error_class, f"{type(error).__name__}: {error}"
    assert fragment in error.message
    assert error.location is not None
    assert Path(error.location.file).resolve() == (BROKEN / case / file).resolve()
    assert error.location.line == line
    source_line = (BROKEN / case / file).read_text().splitlines()[line - 1]
    assert error.location.source_line == source_line
    rendered = str(error).splitlines()
    assert rendered[0].startswith(f"{error.location.file}:{line}:{error.location.column + 1}: error: ")
    assert rendered[1].strip() == source_line.strip()
    caret = rendered[2]
    assert caret.strip().startswith("^")
    # The caret sits under the column the location names.
    indent = len(source_line) - len(source_line.lstrip())
    assert caret.index("^") - 4 == error.location.column - indent


def test_two_architecture_files_need_an_index() -> None:
    with pytest.raises(MarkupError, match="holds 2 architecture files") as caught:
        to_model_proto(BROKEN / "two_architecture_files")
    assert "index=" in caught.value.hint
    proto = to_model_proto(BROKEN / "two_architecture_files", index="other.xml")
    assert [o.name for o in proto.graph.output] == ["x"]


def test_no_architecture_file(tmp_path: Path) -> None:
    with pytest.raises(MarkupError, match="holds no architecture file"):
        to_model_proto(tmp_path)
    with pytest.raises(MarkupError, match="no markup project"):
        to_model_proto(tmp_path / "missing")


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(DATA / name, target)
    return target


def test_weight_of_wrong_shape_is_an_error(tmp_path: Path) -> None:
    project = _copy(tmp_path, "agrippa_pickle")
    np.savez(project / "weights.npz", **{"W$1": np.zeros((3, 4), np.float32), "B$1": np.zeros((3, 1), np.float32)})
    with pytest.raises(MarkupError, match=r"'W\$1' in the weights file has shape \[3, 4\], but its dim is \[3, 3\]") as caught:
        export(project, tmp_path / "m.onnx", suppress=True)
    assert caught.value.location.line == 7 and "reinit" in caught.value.hint
    assert not (tmp_path / "m.onnx").exists()
    # reinit=True re-initialises on purpose, and the written weights then fit.
    export(project, tmp_path / "m.onnx", suppress=True, reinit=True)
    with np.load(project / "weights.npz") as archive:
        assert archive["W$1"].shape == (3, 3)


def test_weight_of_unconvertible_dtype_is_an_error(tmp_path: Path) -> None:
    project = _copy(tmp_path, "agrippa_pickle")
    np.savez(project / "weights.npz", **{"W$1": np.zeros((3, 3), np.complex64)})
    with pytest.raises(MarkupError, match="stored as complex64"):
        export(project, tmp_path / "m.onnx", suppress=True)


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # what an attacker's pickle does: call os.system on load
        return (os.system, (f"touch {self.marker}",))


def test_pickle_carrying_code_is_refused_and_never_runs(tmp_path: Path) -> None:
    project = _copy(tmp_path, "agrippa_pickle")
    marker = tmp_path / "pwned"
    with open(project / "weights.pkl", "wb") as handle:
        pickle.dump({"W$1": _Exploit(marker)}, handle)
    with pytest.raises(MarkupError, match=r"refers to (posix|os|nt)\.system") as caught:
        export(project, tmp_path / "m.onnx", suppress=True)
    assert caught.value.location.file.endswith("weights.pkl")
    assert not marker.exists()
    # The same pickle really would have run the command through the plain unpickler.
    assert pickle.loads(pickle.dumps({"x": _Exploit(marker)})) is not None
    assert marker.exists()


def test_pickle_of_builtins_eval_is_refused(tmp_path: Path) -> None:
    project = _copy(tmp_path, "agrippa_pickle")
    payload = b"cbuiltins\neval\n(S'1+1'\ntR."
    (project / "weights.pkl").write_bytes(payload)
    with pytest.raises(MarkupError, match=r"builtins\.eval"):
        export(project, tmp_path / "m.onnx", suppress=True)


def test_pickle_of_non_numeric_values_is_refused(tmp_path: Path) -> None:
    project = _copy(tmp_path, "agrippa_pickle")
    with open(project / "weights.pkl", "wb") as handle:
        pickle.dump({"W$1": "not an array"}, handle)
    with pytest.raises(MarkupError, match="is not a numeric array"):
        export(project, tmp_path / "m.onnx", suppress=True)
    with open(project / "weights.pkl", "wb") as handle:
        pickle.dump([1, 2], handle)
    with pytest.raises(MarkupError, match="not a dict of arrays"):
        export(project, tmp_path / "m.onnx", suppress=True)


def test_damaged_weight_files(tmp_path: Path) -> None:
    project = _copy(tmp_path, "agrippa_pickle")
    (project / "weights.pkl").write_bytes(b"\x80\x04garbage")
    with pytest.raises(MarkupError, match=r"cannot read weights\.pkl"):
        export(project, tmp_path / "m.onnx", suppress=True)
    (project / "weights.npz").write_bytes(b"not a zip")
    with pytest.raises(MarkupError, match=r"cannot read weights\.npz"):
        export(project, tmp_path / "m.onnx", suppress=True)


def test_bad_meta_json(tmp_path: Path) -> None:
    project = _copy(tmp_path, "meta")
    (project / "meta.json").write_text('{"producer": "me",\n "graph_name": }')
    with pytest.raises(MarkupError, match=r"meta\.json is not valid JSON") as caught:
        to_model_proto(project)
    assert caught.value.location.line == 2


def test_bad_bindings(tmp_path: Path) -> None:
    with pytest.raises(MarkupError, match="binding 'n' is a list"):
        to_model_proto(DATA / "mlp", bindings={"n": [1]})
    with pytest.raises(MarkupError, match="variable 'n' is bound to 'wide', not a number") as caught:
        to_model_proto(DATA / "expressions", bindings={"n": "wide", "m": 4})
    assert caught.value.location.line == 3


_ATTRIBUTE = re.compile(r'(\s)([\w-]+)="([^"]*)"')
_GARBAGE = ["", "[", "var(", "expr(1/0)", "-1", "abc", "[1.5]", "[[1]]", "1e400", "var(zz)", "&quot;q&quot;", "float16"]
_FUZZ_BINDINGS = {"mlp": {"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2}, "imported": {"n": 3}, "op_attributes": {}}


@pytest.mark.parametrize("name", sorted(_FUZZ_BINDINGS))
def test_mutated_markup_fails_only_with_located_dsl_errors(tmp_path: Path, name: str) -> None:
    """Drop or garble each attribute in turn: the result compiles, or raises a located DslError."""
    source = DATA / name
    outcomes = {"compiled": 0, "rejected": 0}
    for architecture in sorted(source.rglob("*.agr")):
        relative = architecture.relative_to(source)
        text = architecture.read_text()
        for match in _ATTRIBUTE.finditer(text):
            variants = [text[: match.start()] + text[match.end() :]]
            variants += [text[: match.start(3)] + junk + text[match.end(3) :] for junk in _GARBAGE]
            for variant in variants:
                project = tmp_path / "p"
                shutil.rmtree(project, ignore_errors=True)
                shutil.copytree(source, project)
                (project / relative).write_text(variant)
                try:
                    to_model_proto(project, bindings=_FUZZ_BINDINGS[name], seed=0)
                    outcomes["compiled"] += 1
                except DslError as error:
                    assert error.location is not None, str(error)
                    assert error.location.line >= 1
                    outcomes["rejected"] += 1
    assert outcomes["rejected"] > outcomes["compiled"] > 0
