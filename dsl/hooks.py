"""Behaviour a lower layer calls and a facade supplies, so no arrow points up.

An ``Op`` called on numpy arrays outside ``@script`` runs eagerly, but ``dsl.opsets``
(knowledge) may not import ``eager`` (a back end).  ``dsl/__init__.py`` — which Python
runs before any ``dsl`` submodule — installs the runner here; opsets read it.  Each hook
is a plain attribute of this module, set once at import; nothing is discovered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["run_op_eagerly", "eager_tensor", "call_as_eager_body"]


def _not_installed(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    raise RuntimeError("dsl.hooks.run_op_eagerly is installed by dsl/__init__.py; it was replaced by None")


# (op, positional arguments, keyword arguments) -> the eager result of calling ``op``.
run_op_eagerly: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any] = _not_installed


def _no_eager_tensor(array: Any) -> Any:
    raise RuntimeError("dsl.hooks.eager_tensor is installed by dsl/__init__.py; it was replaced by None")


# array -> the eager tensor (``eager.EagerTensor``) that runs Python operators as ONNX ops:
# what a weight (``dsl.initializer``) becomes when an operator is applied to it eagerly.
eager_tensor: Callable[[Any], Any] = _no_eager_tensor


def _no_eager_body(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], opset: Any) -> Any:
    raise RuntimeError("dsl.hooks.call_as_eager_body is installed by dsl/__init__.py; it was replaced by None")


# (function, positional arguments, keyword arguments, opset) -> ``function(*args, **kwargs)``
# run as an eagerly running @script body runs its Python: op results are eager tensors and
# Python operators on them are ``opset``'s ops.  The compiler calls a Python function of the
# user's on values known while compiling through it, so the function computes there what
# it computes when the same @script function runs eagerly.
call_as_eager_body: Callable[[Any, tuple[Any, ...], dict[str, Any], Any], Any] = _no_eager_body
