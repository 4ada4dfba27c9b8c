"""Checking the ``dim`` attributes written in markup against what ONNX shape inference derives.

Dims in markup are claims; Agrippa never checked them.  The exported model goes through
``onnx.shape_inference`` (strict mode, so a node whose inputs do not fit fails there)
and every declared dim is compared with the inferred shape; the first disagreement
becomes a :class:`MarkupError` pointing at the ``dim`` attribute that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.markup.state import Declaration

if TYPE_CHECKING:  # imported where used: onnx loads only when shapes are checked
    import onnx

__all__ = ["check_declared_shapes"]

_NODE_NAME = re.compile(r"node name: ([^)]*)\)")
_PREFIX = re.compile(r"^(\[[A-Za-z]+\]\s*)+")


def _shape_of(type_proto: onnx.TypeProto) -> tuple[int | str | None, ...] | None:
    if not type_proto.HasField("tensor_type"):
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim
    )


def _agrees(declared: tuple[int | str | None, ...], inferred: tuple[int | str | None, ...]) -> bool:
    if len(declared) != len(inferred):
        return False
    return all(not (isinstance(d, int) and isinstance(i, int) and d != i) for d, i in zip(declared, inferred))


def check_declared_shapes(
    model: object, declarations: list[Declaration], node_locations: Mapping[str, SourceLocation]
) -> None:
    """Raise MarkupError where shape inference fails or contradicts a declared ``dim``.

    ``model`` is the exported ``onnx.ModelProto``; ``node_locations`` maps node names to
    their tags so an inference failure points at the node that caused it.
    """
    import onnx

    work = onnx.ModelProto()
    work.CopyFrom(model)
    for output in work.graph.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(work, check_type=True, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as error:
        text = str(error)
        found = _NODE_NAME.search(text)
        location = node_locations.get(found.group(1)) if found else None
        reason = text[found.end() :] if found else text
        reason = _PREFIX.sub("", reason.lstrip(": ")).strip()
        raise MarkupError(
            f"ONNX shape inference rejects this node: {reason}",
            location,
            hint="check the dims of the node's inputs and parameters and its attributes",
        ) from None
    shapes: dict[str, tuple[int | str | None, ...]] = {}
    graph = inferred.graph
    for info in (*graph.input, *graph.value_info, *graph.output):
        shape = _shape_of(info.type)
        if shape is not None:
            shapes[info.name] = shape
    for initializer in graph.initializer:
        shapes.setdefault(initializer.name, tuple(int(d) for d in initializer.dims))
    for declaration in declarations:
        actual = shapes.get(declaration.value.name)
        if actual is None or _agrees(declaration.dims, actual):
            continue
        raise MarkupError(
            f"{declaration.what} {declaration.value.name!r} is declared with dim {list(declaration.dims)}, "
            f"but ONNX shape inference gives {list(actual)}",
            declaration.location,
            hint="fix the dim here (or the shapes of what feeds this value)",
        )
