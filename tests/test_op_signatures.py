"""The generated op stub matches the onnx schemas it was made from and is valid Python.

The stub names the onnx it describes on its first line.  With that onnx installed it must
be exactly what the generator writes now; with a newer onnx (pip may install one) every op
it declares must still exist at the version it declares it (onnx never removes a schema),
and the ops the newer onnx adds are left to ``Opset.get_op`` until the stub is regenerated.
(An older onnx, which pyproject still allows, may lack ops the stub declares: checked only
at run time, where such an op is an UnknownOpError.)
"""

from __future__ import annotations

import ast
import pathlib
import re

import onnx
import onnx.defs
import pytest

from dsl import write_op_signatures

STUB = pathlib.Path(write_op_signatures.__file__).with_name("op_signatures.pyi")
CLASS = re.compile(r"^(Opset|AiOnnxMl|AiOnnxPreviewTraining|AiOnnxPreview)(\d+)$")
DOMAINS = {"Opset": "", "AiOnnxMl": "ai.onnx.ml", "AiOnnxPreviewTraining": "ai.onnx.preview.training",
           "AiOnnxPreview": "ai.onnx.preview"}


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(encoding="utf-8"))


def _declared() -> dict[tuple[str, int], dict[str, ast.FunctionDef]]:
    found = {}
    for node in _stub_tree().body:
        match = CLASS.match(node.name) if isinstance(node, ast.ClassDef) else None
        if match:
            methods = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
            found[(DOMAINS[match[1]], int(match[2]))] = methods
    return found


def _stub_onnx_version() -> str:
    match = re.search(r"from onnx (\S+);", STUB.read_text(encoding="utf-8").splitlines()[0])
    assert match, "the stub's first line names the onnx it was made from"
    return match[1]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def test_every_declared_op_exists_in_the_installed_onnx_at_its_version() -> None:
    if _release(onnx.__version__) < _release(_stub_onnx_version()):
        pytest.skip(f"the stub describes onnx {_stub_onnx_version()}, newer than the installed {onnx.__version__}")
    declared = _declared()
    assert len(declared) >= 20
    for (domain, version), methods in declared.items():
        for name in methods:
            schema = onnx.defs.get_schema(name, version, domain)
            assert schema.since_version == version, (domain, version, name)


def test_each_version_class_declares_exactly_the_ops_changed_at_that_version() -> None:
    if _stub_onnx_version() != onnx.__version__:
        pytest.skip(f"the stub describes onnx {_stub_onnx_version()}, not the installed {onnx.__version__}")
    expected: dict[tuple[str, int], set[str]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in DOMAINS.values() and not schema.deprecated:
            expected.setdefault((schema.domain, schema.since_version), set()).add(schema.name)
    declared = {key: set(methods) for key, methods in _declared().items() if methods}
    assert declared == expected


def test_conv_has_inputs_by_position_or_name_and_keyword_attributes() -> None:
    conv = _declared()[("", 11)]["Conv"]
    assert [a.arg for a in conv.args.args] == ["self", "X", "W", "B"] and not conv.args.posonlyargs
    assert "pads" in [a.arg for a in conv.args.kwonlyargs]
    cast = _declared()[("", 21)]["Cast"]
    to = next(a for a in cast.args.kwonlyargs if a.arg == "to")
    assert ast.unparse(to.annotation) == "_DataType"  # op.Cast(x, to=INT64)


def test_stub_is_regenerated_from_this_onnx() -> None:
    if _stub_onnx_version() != onnx.__version__:
        pytest.skip(f"stub made from onnx {_stub_onnx_version()}, not {onnx.__version__}; "
                    "run python -m dsl.write_op_signatures")
    assert write_op_signatures.op_signatures_source() == STUB.read_text(encoding="utf-8")
