"""ONNX's own shape inference of one node, asked the same way by the compiler and eager mode.

ONNX's refusal of a node (``InferenceError``) is the user's mistake.  The compiler asks
it for the ops :mod:`dsl.shape_rules` has no rule for, at the node's line
(:mod:`dsl.frontend.onnx_inference`); eager mode asks it, with the call's shapes, after
onnxruntime refused a call (onnxruntime runs the same inference when it loads a model).
Both say it in the words of :func:`infer_node`, so a program gets one message either way.
"""

from __future__ import annotations

from typing import Any

import onnx

from dsl.errors import DslTypeError

__all__ = ["INFERENCE_HINT", "infer_node"]

INFERENCE_HINT = "ONNX's shape inference refuses these inputs; check the shapes and attributes"


def infer_node(schema: Any, node: onnx.NodeProto, input_types: dict[str, onnx.TypeProto],
               location: Any = None) -> dict[str, onnx.TypeProto]:
    """The output types ONNX infers for ``node`` (of ``schema``) from its inputs' types; a
    ``DslTypeError`` at ``location`` with ONNX's reason where it refuses the node.

    >>> import onnx.defs, onnx.helper as oh
    >>> node = oh.make_node("Flatten", ["x"], ["y"], axis=5)
    >>> infer_node(onnx.defs.get_schema("Flatten", 21), node, {"x": oh.make_tensor_type_proto(1, [2, 3])})
    Traceback (most recent call last):
    ...
    dsl.errors.DslTypeError: error: Flatten: Invalid value(5) for attribute 'axis'
    hint: ONNX's shape inference refuses these inputs; check the shapes and attributes
    """
    import onnx.checker
    import onnx.shape_inference

    try:
        found: dict[str, onnx.TypeProto] = onnx.shape_inference.infer_node_outputs(schema, node, input_types)
    except onnx.shape_inference.InferenceError as err:
        detail = str(err).split("): ", 1)[-1].strip() if "): " in str(err) else str(err)
        detail = detail.removeprefix("[ShapeInferenceError] ").removeprefix("[TypeInferenceError] ")
        raise DslTypeError(f"{schema.name}: {detail}", location, hint=INFERENCE_HINT) from None
    except onnx.checker.ValidationError as err:  # an input of a type its formal does not admit
        raise DslTypeError(f"{schema.name}: {str(err).strip()}", location,
                           hint=f"the inputs' types must be ones the schema of {schema.name} admits "
                           f"(onnx.defs.get_schema({schema.name!r}, {schema.since_version}))") from None
    return found
