"""Write ``dsl/op_signatures.pyi``: a typed class per opset version, for editors and type checkers.

Opsets are built at run time from ``onnx.defs`` (no generated runtime modules), so without
this stub a type checker would see ``Opset`` objects whose ops are unknown.  The stub has
one class per version of each standard domain (``Opset18`` derives from ``Opset17`` and
declares the ops whose schema changed at 18), and ``opset18: Opset18`` for the module-level
names, so mypy and pyright flag an unknown op, an unknown keyword, a missing or extra
input, an attribute of the wrong Python type and, where the schema's type constraint
excludes it, a Python literal of the wrong kind (``op.Sqrt("a")``, ``op.BitwiseAnd(x,
1.5)``).  Tensors themselves are typed loosely (numpy arrays, torch tensors, graph values).

Run ``python -m dsl.write_op_signatures`` after upgrading onnx; the stub records the onnx
version it describes, and a newer onnx's new ops are still reachable (``opset.get_op``).
"""

from __future__ import annotations

import keyword
import pathlib
import re
import sys
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used, like the rest of onnx here
    import onnx.defs

__all__ = ["op_signatures_source", "class_name", "main"]

# AttributeProto.AttributeType -> the Python type an attribute is written as.
_ATTR_ANNOTATIONS = {
    1: "float",
    2: "int",
    3: "str | bytes",
    4: "Any",
    5: "Any",
    6: "Sequence[float]",
    7: "Sequence[int]",
    8: "Sequence[str]",
    9: "Sequence[Any]",
    10: "Sequence[Any]",
    11: "Any",
    12: "Sequence[Any]",
    13: "Any",
    14: "Sequence[Any]",
}
# An INT attribute that holds an element type also takes FLOAT, INT64, ... (op.Cast(x, to=INT64)).
_DATA_TYPE_WORDS = re.compile(r"data ?type|TensorProto|element type", re.IGNORECASE)
_DOMAINS = {"": "Opset", "ai.onnx.ml": "AiOnnxMl", "ai.onnx.preview.training": "AiOnnxPreviewTraining",
            "ai.onnx.preview": "AiOnnxPreview"}
_MODULE_PREFIXES = {"": "opset", "ai.onnx.ml": "ai_onnx_ml", "ai.onnx.preview.training": "ai_onnx_preview_training",
                    "ai.onnx.preview": "ai_onnx_preview"}
_INTEGRAL = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int4", "uint4", "int2",
             "uint2", "bool"}
# A later version changes an op's signature (ReduceMean's axes: an attribute, then an input):
# an override no base accepts, which is the point.
_HEADER = '''\
# mypy: disable-error-code="override"
# pyright: reportIncompatibleMethodOverride=false
"""Typed signatures of the ONNX ops, one class per opset version, for editors and type checkers."""

from collections.abc import Sequence
from typing import Any, Protocol, TypeAlias

import numpy as np

from dsl.frontend.weights import Initializer
from dsl.opsets import Opset
from dsl.types import ElementType

class _TensorLike(Protocol):
    """numpy arrays and scalars, torch tensors: anything with a shape and a dtype."""

    @property
    def shape(self) -> Any: ...
    @property
    def dtype(self) -> Any: ...

class _TorchLike(Protocol):
    """torch tensors (whose element type the stub cannot see), but not numpy arrays."""

    @property
    def shape(self) -> Any: ...
    @property
    def requires_grad(self) -> bool: ...

# The inputs an op takes, by what its type constraint allows: Python literals and numpy
# arrays of an element type the constraint excludes are refused (graph values and torch
# tensors are not told apart by element type).
_Number: TypeAlias = _TensorLike | Initializer | complex | list[Any] | tuple[Any, ...]
_Integer: TypeAlias = (
    np.ndarray[Any, np.dtype[np.integer[Any]]] | np.integer[Any] | _TorchLike | Initializer | int | list[Any]
    | tuple[Any, ...]
)
_Integral: TypeAlias = (
    np.ndarray[Any, np.dtype[np.integer[Any] | np.bool_]] | np.integer[Any] | np.bool_ | _TorchLike | Initializer | int
    | list[Any] | tuple[Any, ...]
)
_Boolean: TypeAlias = (
    np.ndarray[Any, np.dtype[np.bool_]] | np.bool_ | _TorchLike | Initializer | bool | list[Any] | tuple[Any, ...]
)
_DataType: TypeAlias = int | ElementType
'''


def class_name(domain: str, version: int) -> str:
    """The stub's class for an opset: ``class_name("", 18) == "Opset18"``."""
    return f"{_DOMAINS[domain]}{version}"


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "arg"
    if cleaned[0].isdigit() or keyword.iskeyword(cleaned):
        cleaned = f"{cleaned}_"
    return cleaned


def _summary(doc: str | None) -> str:
    for paragraph in textwrap.dedent(doc or "").strip().split("\n\n"):
        text = " ".join(paragraph.split())
        if text:
            text = text.replace("\\", "\\\\").replace('"""', "'''")
            return text if len(text) <= 200 else text[:197] + "..."
    return ""


def _input_annotation(schema: onnx.defs.OpSchema, type_str: str) -> str:
    """``_Number``/``_Integer``/``_Integral``/``_Boolean`` where the constraint allows only such tensors."""
    allowed = [type_str]
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_str:
            allowed = list(constraint.allowed_type_strs)
    elements = set()
    for allowed_type in allowed:
        match = re.fullmatch(r"tensor\((\w+)\)", allowed_type)
        if match is None:  # sequences, optionals, maps: any value
            return "Any"
        elements.add(match.group(1))
    if not elements or "string" in elements:
        return "Any"
    if elements == {"bool"}:
        return "_Boolean"
    if elements <= _INTEGRAL - {"bool"}:
        return "_Integer"  # (a Python bool is an int to a type checker: only numpy's is refused)
    if elements <= _INTEGRAL:
        return "_Integral"
    return "_Number"


def _inputs(schema: onnx.defs.OpSchema, used: set[str]) -> list[str]:
    import onnx.defs

    option = onnx.defs.OpSchema.FormalParameterOption
    params = []
    optional_seen = False
    for formal in schema.inputs:
        name = _identifier(formal.name)
        while name in used:
            name += "_"
        used.add(name)
        annotation = _input_annotation(schema, formal.type_str)
        if formal.option == option.Variadic:
            params.append(f"*{name}: {annotation}")
            break
        if formal.option == option.Optional or optional_seen:
            optional_seen = True
            params.append(f"{name}: {annotation} | None = None")
        else:
            params.append(f"{name}: {annotation}")
    return params


def _attributes(schema: onnx.defs.OpSchema, used: set[str]) -> list[str]:
    params = []
    for attr_name, attr in sorted(schema.attributes.items()):
        name = _identifier(attr_name)
        if name in used:
            continue
        used.add(name)
        # onnx's stub leaves out the __int__ of its pybind11 enum AttrType
        kind = int(attr.type)  # type: ignore[call-overload]
        annotation = _ATTR_ANNOTATIONS.get(kind, "Any")
        if kind == 2 and _DATA_TYPE_WORDS.search(attr.description or ""):
            annotation = "_DataType"
        default = "" if attr.required else " = ..."
        params.append(f"{name}: {annotation}{default}")
    return params


def _method(schema: onnx.defs.OpSchema) -> list[str]:
    used = {"self"}
    # Inputs may be passed by name too (op.Unsqueeze(x, axes=[1])), as onnxscript allows;
    # attributes are keywords only.
    params = ["self", *_inputs(schema, used)]
    attributes = _attributes(schema, used)
    if attributes:
        if not params[-1].startswith("*"):
            params.append("*")
        params += attributes
    lines = [f"    def {schema.name}({', '.join(params)}) -> Any:"]
    summary = _summary(schema.doc)
    if summary:
        lines.append(f'        """{summary}"""')
    lines.append("        ...")
    return lines


def _schemas_by_version() -> dict[tuple[str, int], list[onnx.defs.OpSchema]]:
    import onnx.defs

    found: dict[tuple[str, int], list[onnx.defs.OpSchema]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in _DOMAINS and not schema.deprecated:
            found.setdefault((schema.domain, schema.since_version), []).append(schema)
    return found


def op_signatures_source() -> str:
    """The text of the stub for the installed onnx (deterministic: sorted by domain, version, op).

    >>> "class Opset18(Opset17):" in op_signatures_source()
    True
    """
    import onnx

    from dsl.opsets import schema_domains

    by_version = _schemas_by_version()
    newest = schema_domains()
    lines = [f"# Generated by `python -m dsl.write_op_signatures` from onnx {onnx.__version__}; do not edit.",
             _HEADER]
    names = []
    for domain in _DOMAINS:
        for version in range(1, newest.get(domain, 0) + 1):
            base = class_name(domain, version - 1) if version > 1 else "Opset"
            lines.append(f"class {class_name(domain, version)}({base}):")
            schemas = sorted(by_version.get((domain, version), []), key=lambda s: s.name)
            for schema in schemas:
                lines += _method(schema)
            if not schemas:
                lines.append("    ...")
            lines.append("")
            names.append((f"{_MODULE_PREFIXES[domain]}{version}", class_name(domain, version)))
    for name, cls in names:
        lines.append(f"{name}: {cls}")
    # `opset` is the newest the installed onnxruntime runs: typed as the newest onnx defines.
    lines.append(f"opset: {class_name('', newest[''])}")
    lines.append("")
    lines.append("__all__: list[str] = [" + ", ".join(f'"{name}"' for name, _ in names) + ', "opset"]')
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write the stub beside this module (or to the path given).

    >>> main(["/tmp/op_signatures.pyi"])      # doctest: +SKIP
    """
    args = sys.argv[1:] if argv is None else argv
    target = pathlib.Path(args[0]) if args else pathlib.Path(__file__).with_name("op_signatures.pyi")
    target.write_text(op_signatures_source(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

