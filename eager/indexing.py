"""``tensor[index]`` on an EagerTensor, through the same lowering the compiler uses.

:func:`dsl.indexing.lower_subscript` turns a subscript into ONNX ops via an ``emit``
callback; here each op runs at once (constants are just their arrays), so an index
means in eager mode exactly what it means in the exported graph.
"""

from __future__ import annotations

from typing import Any

from dsl.errors import DslError
from dsl.indexing import lower_subscript
from eager.call_site import caller_location

__all__ = ["eager_getitem"]


def _emit(op_type: str, inputs: list[Any], attributes: dict[str, Any]) -> list[Any]:
    if op_type == "Constant" and not inputs and set(attributes) == {"value"}:
        return [attributes["value"]]
    from eager.op_call import call_op
    from eager.tensor import operator_opset

    return [call_op(operator_opset().get_op(op_type), inputs, attributes, num_outputs=1)]


def eager_getitem(target: Any, index: Any) -> Any:
    """``target[index]`` computed with the compiler's lowering (Slice, Gather, Squeeze...)."""
    try:
        return lower_subscript(target, index, _emit)
    except DslError as err:
        raise err.with_location(caller_location()) from None
