"""The generated op stub stays in step with the installed onnx and is valid Python."""

from __future__ import annotations

import ast
import pathlib

import onnx
import onnx.defs
import pytest

from dsl import write_op_signatures

STUB = pathlib.Path(write_op_signatures.__file__).with_name("op_signatures.pyi")


def test_stub_parses_and_names_every_current_op() -> None:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    stub_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OpSignatures")
    methods = {n.name for n in stub_class.body if isinstance(n, ast.FunctionDef)}
    current = {
        s.name
        for s in onnx.defs.get_all_schemas_with_history()
        if s.domain in ("", "ai.onnx.ml") and not s.deprecated
    }
    assert current <= methods


def test_conv_signature_has_inputs_by_position_or_name_and_keyword_attributes() -> None:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    conv = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "Conv")
    assert [a.arg for a in conv.args.args] == ["self", "X", "W", "B"] and not conv.args.posonlyargs
    assert "pads" in [a.arg for a in conv.args.kwonlyargs]


def test_stub_is_regenerated_from_this_onnx() -> None:
    text = STUB.read_text(encoding="utf-8")
    if f"from onnx {onnx.__version__};" not in text.splitlines()[0]:
        pytest.skip(f"stub made from another onnx than {onnx.__version__}; run python -m dsl.write_op_signatures")
    assert write_op_signatures.op_signatures_source() == text
