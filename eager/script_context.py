"""What an eagerly running ``@script`` body sets for the ops it runs.

Two context variables, set by :func:`eager.script_call.call_script` (and by
:mod:`eager.control_flow` around ``@graph()`` bodies) and read wherever an op runs:
``OPERATOR_OPSET``, the opset whose ops Python operators (``x + y``, ``x[i]``) stand
for, and ``IN_EAGER_SCRIPT``, true while a body runs, so op results stay
:class:`~eager.tensor.EagerTensor` values there instead of becoming plain arrays.
"""

from __future__ import annotations

import contextvars
import functools
from typing import Any

__all__ = ["OPERATOR_OPSET", "IN_EAGER_SCRIPT", "operator_opset"]

# The ai.onnx opset whose ops Python operators stand for (the running script's opset).
OPERATOR_OPSET: contextvars.ContextVar[Any] = contextvars.ContextVar("eager_operator_opset", default=None)
# True while a @script body runs eagerly: op results stay EagerTensors there.
IN_EAGER_SCRIPT: contextvars.ContextVar[bool] = contextvars.ContextVar("eager_in_script", default=False)


def operator_opset() -> Any:
    """The opset Python operators use: the running script's, else the newest onnxruntime loads.

    >>> operator_opset().domain
    ''
    """
    found = OPERATOR_OPSET.get()
    if found is not None:
        return found
    return _newest_loadable_opset()


@functools.cache
def _newest_loadable_opset() -> Any:
    from dsl.onnxruntime_limits import max_opset
    from dsl.opsets import get_opset

    return get_opset("", max_opset())
