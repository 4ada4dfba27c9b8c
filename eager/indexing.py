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
from eager.script_context import operator_opset

__all__ = ["eager_getitem"]


def _emit(op_type: str, inputs: list[Any], attributes: dict[str, Any]) -> list[Any]:
    if op_type == "Constant" and not inputs and set(attributes) == {"value"}:
        return [attributes["value"]]
    # Each op the lowering emits (Slice, Gather, Squeeze...) has one output; calling it runs it.
    return [operator_opset().get_op(op_type)(*inputs, **attributes)]


def eager_getitem(target: Any, index: Any) -> Any:
    """``target[index]`` computed with the compiler's lowering (Slice, Gather, Squeeze...)."""
    try:
        return lower_subscript(target, index, _emit)
    except DslError as err:
        raise err.with_location(caller_location()) from None
