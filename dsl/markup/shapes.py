"""Checking the ``dim`` attributes written in markup against what ONNX shape inference derives.

Dims in markup are claims; Agrippa never checked them.  The exported model goes through
``onnx.shape_inference`` (strict mode, so a node whose inputs do not fit fails there)
and every declared dim is compared with the inferred shape; the first disagreement
becomes a :class:`MarkupError` pointing at the ``dim`` attribute that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.markup.state import Declaration, warn

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
    model: object,
    declarations: list[Declaration],
    node_locations: Mapping[str, SourceLocation],
    param_locations: Mapping[str, SourceLocation] | None = None,
    *,
    lenient: bool = False,
) -> None:
    """Raise MarkupError where shape inference fails or contradicts a declared ``dim``.

    ``model`` is the exported ``onnx.ModelProto``; ``node_locations`` maps node names to
    their tags so an inference failure points at the node that caused it, or, where the
    node reads parameters (``param_locations``: initializer name -> ``<params>`` tag),
    at the parameter whose ``dim`` does not fit, with the shapes of the node's inputs.
    ``lenient`` makes a declared dim that inference contradicts a warning, and writes the
    inferred shape over it in ``model``.
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
        if found is not None and param_locations:
            _raise_at_param(work, found.group(1), reason, param_locations)
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
        message = (
            f"{declaration.what} {declaration.value.name!r} is declared with dim {list(declaration.dims)}, "
            f"but ONNX shape inference gives {list(actual)}"
        )
        if lenient:
            warn(f"{message}; the inferred shape is kept under lenient=True", declaration.location)
            _replace_shape(model, declaration.value.name, actual)
            continue
        raise MarkupError(message, declaration.location,
                          hint="fix the dim here (or the shapes of what feeds this value); lenient=True warns instead")


def _replace_shape(model: Any, name: str, shape: tuple[int | str | None, ...]) -> None:
    """Write the inferred ``shape`` over a contradicted declared one in ``model`` itself."""
    import onnx.helper

    for info in (*model.graph.output, *model.graph.value_info):
        if info.name == name and info.type.HasField("tensor_type"):
            elem = info.type.tensor_type.elem_type
            info.type.CopyFrom(onnx.helper.make_tensor_type_proto(elem, list(shape)))


def _raise_at_param(
    work: onnx.ModelProto, node_name: str, reason: str, param_locations: Mapping[str, SourceLocation]
) -> None:
    """A node that inference rejects and that reads a parameter: most often the param's
    declared dim is what does not fit, so point there and show every input's shape."""
    import onnx

    node = next((n for n in work.graph.node if n.name == node_name), None)
    params = [] if node is None else [name for name in node.input if name in param_locations]
    if node is None or not params:
        return
    loose = onnx.shape_inference.infer_shapes(work, strict_mode=False)
    shapes = {info.name: _shape_of(info.type) for info in (*loose.graph.input, *loose.graph.value_info)}
    shapes.update((init.name, tuple(int(d) for d in init.dims)) for init in loose.graph.initializer)
    described = ", ".join(
        f"{name!r} {list(shape) if shape is not None else '(unknown shape)'}"
        for name in node.input if name for shape in [shapes.get(name)]
    )
    raise MarkupError(
        f"parameter {params[0]!r} has dim {list(shapes.get(params[0]) or ())}, which does not fit the other inputs "
        f"of {node.op_type} ({described}): {reason}",
        param_locations[params[0]],
        hint="fix the dim of this <params> (or of what feeds the node)",
    )
