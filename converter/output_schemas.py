"""What onnx.defs says about a node's outputs: which domains have schemas, and which
outputs of an op its schema lets a node leave out (written as ``""``)."""

from __future__ import annotations

import functools

from dsl import ir

__all__ = ["SCHEMA_DOMAINS", "output_is_optional"]

# Domains whose ops have schemas in onnx.defs (custom domains have none).
SCHEMA_DOMAINS = frozenset({"", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview"})


def output_is_optional(node: ir.Node, index: int) -> bool:
    """Whether output ``index`` of ``node`` may be omitted (an op's schema says so; a
    function call or a custom op has none).

    >>> output_is_optional(ir.Node("Dropout"), 1)
    True
    """
    if node.callee is not None or node.domain not in SCHEMA_DOMAINS:
        return False  # no schema says the output may be left out
    return index in _optional_output_indices(node.op_type, node.domain)


@functools.cache
def _optional_output_indices(op_type: str, domain: str) -> frozenset[int]:
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(op_type, domain)
    except onnx.defs.SchemaError:
        return frozenset()
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    return frozenset(i for i, formal in enumerate(schema.outputs) if formal.option == optional)
