"""``@script`` and ``@graph``: the thin facade that ties a Python function to the compiler.

Decorating only records the function; the ``ast`` is parsed on first use
(``.function``, ``.to_function_proto()``, ``.to_model_proto()``, or a call from another
scripted function) and the result is kept, so decorating a thousand functions at import
costs next to nothing.  Calling a ScriptFunction with arrays runs its Python body eagerly.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from dsl import ir
from dsl.opsets import Opset

if TYPE_CHECKING:
    import onnx

__all__ = ["script", "graph", "ScriptFunction", "GraphFunction"]

F = TypeVar("F", bound=Callable[..., Any])

# The domain of a scripted function when it becomes a model-local FunctionProto; the
# same default as onnxscript, so models exported by either name their functions alike.
DEFAULT_DOMAIN = "this"


class ScriptFunction:
    """A Python function compiled (lazily) into an ONNX function.

    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def relu6(x: FLOAT[...]) -> FLOAT[...]:
    ...     return op.Clip(x, 0.0, 6.0)
    >>> relu6.to_model_proto().graph.node[0].op_type   # doctest: +SKIP
    'Clip'
    """

    def __init__(
        self,
        python_function: Callable[..., Any],
        *,
        opset: Opset | None = None,
        domain: str = DEFAULT_DOMAIN,
        name: str | None = None,
        inline: bool = False,
    ) -> None:
        self.python_function = python_function
        self.opset = opset
        self.domain = domain
        self.name = name or python_function.__name__
        self.inline = inline
        self._function: ir.Function | None = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, python_function)

    @property
    def function(self) -> ir.Function:
        """The IR of this function, compiled on first access and then kept."""
        if self._function is None:
            with self._lock:
                if self._function is None:
                    from dsl.frontend import compile_script

                    self._function = compile_script(self)
        return self._function

    @property
    def opset_version(self) -> int | None:
        return None if self.opset is None else self.opset.version

    def to_function_proto(self) -> onnx.FunctionProto:
        """This function as an ``onnx.FunctionProto`` (its callees are not included)."""
        from converter.to_onnx import function_to_proto

        return function_to_proto(self.function)

    def to_model_proto(self, **options: Any) -> onnx.ModelProto:
        """A model whose graph is this function; options as :func:`converter.to_onnx.model_to_proto`.

        ``ir_version=``, ``producer_name=``, ``io_types=`` and ``inline=`` override the
        defaults; called functions become model-local functions unless inlined.
        ``functions=[other_script, ...]`` adds model-local functions nothing calls and
        ``initializers=[weight, ...]`` (``dsl.initializer`` objects) initializers nothing
        reads: what ``converter.to_python`` writes for a model that has them.

        >>> model = relu6.to_model_proto(producer_name="me")   # doctest: +SKIP
        """
        from converter.to_onnx import model_to_proto

        if options.get("functions"):
            options["functions"] = [_ir_function(f) for f in options["functions"]]
        if options.get("initializers"):
            options["initializers"] = [_ir_weight(w) for w in options["initializers"]]
        return model_to_proto(self.function, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from eager import call_script

        return call_script(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<ScriptFunction {self.domain + '::' if self.domain else ''}{self.name}>"


def _ir_function(function: Any) -> ir.Function:
    if isinstance(function, ScriptFunction):
        return function.function
    if isinstance(function, ir.Function):
        return function
    from dsl.errors import DslTypeError

    raise DslTypeError(
        f"functions= takes @script functions, not {type(function).__name__}",
        hint="list the decorated functions themselves: functions=[helper]",
    )


def _ir_weight(weight: Any) -> ir.Tensor | ir.SparseTensor:
    from dsl.frontend.weights import Initializer

    if isinstance(weight, Initializer):
        return weight.sparse if weight.sparse is not None else weight.tensor
    from dsl.errors import DslTypeError

    raise DslTypeError(
        f"initializers= takes dsl.initializer(...) weights, not {type(weight).__name__}",
        hint="declare the weight with w = initializer(array, name='w') and list w",
    )


class GraphFunction:
    """A nested function decorated ``@graph()``: a subgraph to pass as an attribute.

    It is compiled where it is used (as ``body=...`` of Loop/Scan, ``then_branch=`` of If),
    so it may read values of the enclosing scripted function (outer-scope capture).
    """

    def __init__(self, python_function: Callable[..., Any]) -> None:
        self.python_function = python_function
        self.name = python_function.__name__
        functools.update_wrapper(self, python_function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.python_function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<GraphFunction {self.name}>"


@overload
def script(opset: Callable[..., Any]) -> ScriptFunction: ...
@overload
def script(
    opset: Opset | None = None,
    default_opset: Opset | None = None,
    *,
    domain: str = ...,
    name: str | None = None,
    inline: bool = False,
) -> Callable[[Callable[..., Any]], ScriptFunction]: ...


def script(
    opset: Any = None,
    default_opset: Opset | None = None,
    *,
    domain: str = DEFAULT_DOMAIN,
    name: str | None = None,
    inline: bool = False,
    **unused: Any,
) -> Any:
    """Decorate a Python function so it compiles to ONNX (``@script()`` or ``@script``).

    ``opset`` (or onnxscript's ``default_opset``) pins the ai.onnx opset used for
    operators (``+`` -> ``Add``) and constants; by default it is inferred from the ops the
    body calls.  ``domain``/``name`` name the function when other functions call it;
    ``inline=True`` makes callers inline the body instead of calling a model-local function.

    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def double(x: FLOAT[...]) -> FLOAT[...]:
    ...     return x + x
    """
    if callable(opset) and not isinstance(opset, Opset):
        return ScriptFunction(opset)
    if unused:
        from dsl.errors import DslTypeError

        raise DslTypeError(
            f"script() got unexpected keyword argument(s) {', '.join(sorted(unused))}",
            hint="script() takes opset, default_opset, domain, name and inline",
        )
    chosen = opset if opset is not None else default_opset
    if chosen is not None and not isinstance(chosen, Opset):
        from dsl.errors import DslTypeError

        raise DslTypeError(f"script(opset=...) takes an Opset such as opset18, not {chosen!r}")

    def decorate(python_function: Callable[..., Any]) -> ScriptFunction:
        return ScriptFunction(python_function, opset=chosen, domain=domain, name=name, inline=inline)

    return decorate


def graph() -> Callable[[Callable[..., Any]], GraphFunction]:
    """Decorate a nested function to be passed as a subgraph attribute (Loop/Scan/If body)."""

    def decorate(python_function: Callable[..., Any]) -> GraphFunction:
        return GraphFunction(python_function)

    return decorate
