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

__all__ = ["OPERATOR_OPSET", "IN_EAGER_SCRIPT", "call_as_body", "operator_opset"]

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


def call_as_body(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], opset: Any) -> Any:
    """``function(*args, **kwargs)`` as Python runs inside an eagerly running ``@script``
    body: op results stay eager tensors, Python operators are ``opset``'s ops.  The
    compiler calls a Python function of the user's on values known while compiling so
    (``dsl.hooks.call_as_eager_body``): ``t.dtype = INT64.dtype`` and ``t.dtype.bitwidth``
    inside it then mean what they mean eagerly.

    >>> import numpy as np
    >>> from dsl import opset18
    >>> type(call_as_body(opset18.Abs, (np.ones(2),), {}, opset18)).__name__
    'EagerTensor'
    """
    in_script = IN_EAGER_SCRIPT.set(True)
    opset_token = OPERATOR_OPSET.set(opset) if opset is not None else None
    try:
        return function(*args, **kwargs)
    finally:
        IN_EAGER_SCRIPT.reset(in_script)
        if opset_token is not None:
            OPERATOR_OPSET.reset(opset_token)


@functools.cache
def _newest_loadable_opset() -> Any:
    from dsl.onnxruntime_limits import max_opset
    from dsl.opsets import get_opset

    return get_opset("", max_opset())
