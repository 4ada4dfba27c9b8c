"""``@script`` and ``@graph``: the thin facade that runs front end -> passes -> back end.

Decorating only records the function; the ``ast`` is parsed on first use
(``.function``, ``.to_function_proto()``, ``.to_model_proto()``, or a call from another
scripted function) and the result is kept, so decorating a thousand functions at import
costs next to nothing.  The front end (:mod:`dsl.frontend`) compiles the function and the
functions it calls; :func:`finish` runs the passes it asks for (:mod:`dsl.passes`:
prune the loop-carried copies of ``while`` conditions, inline ``@script(inline=True)``
callees); :func:`model_to_proto` runs the passes an export asks for, then the ONNX back
end.  Calling a ScriptFunction with arrays runs its Python body eagerly.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar, overload

from dsl import ir
from dsl.frontend.scripted import CompiledFunction, GraphDecorator, Scripted, ScriptedGraph
from dsl.opsets import Opset
from dsl.tracebacks import hide_library_frames, user_traceback

if TYPE_CHECKING:
    import onnx

__all__ = [
    "script", "graph", "ScriptFunction", "GraphFunction", "ScriptDecorator", "GraphDecoratorCall", "finish",
    "model_to_proto", "export_onnx_lib",
]

F = TypeVar("F", bound=Callable[..., Any])
# The decorated function's parameters and result, so that a type checker knows an eager
# call's arguments (names, count, attribute types) and result, and the methods it has.
P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

# The domain of a scripted function when it becomes a model-local FunctionProto; the
# same default as onnxscript, so models exported by either name their functions alike.
DEFAULT_DOMAIN = "this"

# What ``@script(..., ir_version=7)`` may fix for every model exported from the function
# (onnxscript keeps such keywords for ``to_model_proto``).
MODEL_OPTIONS = ("ir_version", "producer_name", "producer_version", "doc_string", "metadata_props")


class ScriptFunction(Scripted, Generic[P, R]):
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
        python_function: Callable[P, R],
        *,
        opset: Opset | None = None,
        domain: str = DEFAULT_DOMAIN,
        name: str | None = None,
        inline: bool = False,
        domain_version: int = 1,
        model_options: dict[str, Any] | None = None,
    ) -> None:
        self.python_function = python_function
        self.opset = opset
        self.domain = domain
        self.domain_version = domain_version
        self.model_options = dict(model_options or {})
        self.name = name or python_function.__name__
        self.inline = inline
        self.compiled: ir.Function | None = None
        self.compile_lock = threading.Lock()
        self.defining_locals: dict[str, Any] | None = None  # see _with_defining_locals
        functools.update_wrapper(self, python_function)

    @property
    def function(self) -> ir.Function:
        """The IR of this function, compiled on first access and then kept."""
        found = self.compiled
        if found is None:
            from dsl.frontend import compile_script

            found = compile_script(self, finish)
        return found

    @property
    def opset_version(self) -> int | None:
        return None if self.opset is None else self.opset.version

    @user_traceback
    def to_function_proto(self) -> onnx.FunctionProto:
        """This function as an ``onnx.FunctionProto`` (its callees are not included)."""
        from converter.to_onnx import function_to_proto

        return function_to_proto(self.function)

    @user_traceback
    def to_model_proto(self, **options: Any) -> onnx.ModelProto:
        """A model whose graph is this function; options as :func:`model_to_proto`.

        ``ir_version=``, ``producer_name=``, ``io_types=`` and ``inline=`` override the
        defaults; called functions become model-local functions unless inlined.
        ``functions=[other_script, ...]`` adds model-local functions nothing calls and
        ``initializers=[weight, ...]`` (``dsl.initializer`` objects) initializers nothing
        reads: what ``converter.to_python`` writes for a model that has them.  Options
        not given come from ``self.model_options`` (the ``@script(ir_version=...)``
        keywords, or what a file from ``converter.to_python`` assigns there).

        >>> model = relu6.to_model_proto(producer_name="me")   # doctest: +SKIP
        """
        options = {**self.model_options, **options}
        if options.get("functions"):
            options["functions"] = [_ir_function(f) for f in options["functions"]]
        if options.get("initializers"):
            options["initializers"] = [_ir_weight(w) for w in options["initializers"]]
        from dsl.progress import working

        with working(f"compiling {self.name}"):  # (a bar only where that takes long and a person watches)
            return model_to_proto(self.function, **options)

    def __call__(self, /, *args: P.args, **kwargs: P.kwargs) -> R:
        from eager import call_script

        try:
            return call_script(self, args, kwargs)
        except Exception as error:
            hide_library_frames(error)  # (a DslError's traceback ends at the user's call)
            raise

    def __repr__(self) -> str:
        return f"<ScriptFunction {self.domain + '::' if self.domain else ''}{self.name}>"


def finish(compiled: CompiledFunction) -> ir.Function:
    """The passes the front end asks for, in order: what ``.function`` keeps.

    The loop-carried copies of ``while`` conditions that nothing reads are dropped (in
    place), then the calls of ``@script(inline=True)`` callees are inlined.

    >>> from dsl.frontend import compile_script
    >>> function = compile_script(relu6, finish)      # what relu6.function does   # doctest: +SKIP
    """
    from dsl.passes import InlinePass, PruneLoopCarried

    function = compiled.function
    if compiled.while_conditions:
        function = PruneLoopCarried(only=compiled.while_conditions)(function).target
    if compiled.inline_callees:
        function = InlinePass(only=compiled.inline_callees)(function).target
    return function


def model_to_proto(
    function_or_model: ir.Function | ir.Model,
    *,
    inline: bool = False,
    attributes: dict[str, Any] | None = None,
    **options: Any,
) -> onnx.ModelProto:
    """:func:`converter.to_onnx.model_to_proto` with the options a person writes.

    ``inline=True`` inlines every call of a function (the inline pass) instead of writing
    model-local functions; ``attributes=`` gives attribute parameters Python values
    (``{"alpha": 0.5}``), which become IR attributes of the parameters' kinds here.  The
    other options go to the back end unchanged.

    >>> model = model_to_proto(relu6.function, inline=True)     # doctest: +SKIP
    """
    from converter.to_onnx import model_to_proto as encode_model

    if isinstance(function_or_model, ir.Function):
        if inline:
            from dsl.passes import InlinePass

            function_or_model = InlinePass()(function_or_model).target
        if attributes:
            attributes = _ir_attributes(function_or_model, attributes)
    return encode_model(function_or_model, attributes=attributes, **options)


def _ir_attributes(function: ir.Function, attributes: dict[str, Any]) -> dict[str, Any]:
    """Python values given for ``function``'s attribute parameters, as IR attributes of
    their kinds; a name that is no parameter is left for the back end to refuse."""
    from dsl.opsets import python_to_attr

    params = {p.name: p for p in function.attr_params}
    converted: dict[str, Any] = {}
    for name, value in attributes.items():
        param = params.get(name)
        if param is None or isinstance(value, ir.Attr):
            converted[name] = value
        else:
            converted[name] = python_to_attr(name, value, param.kind, param.location)
    return converted


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


class GraphFunction(ScriptedGraph, Generic[P, R]):
    """A nested function decorated ``@graph()``: a subgraph to pass as an attribute.

    It is compiled where it is used (as ``body=...`` of Loop/Scan, ``then_branch=`` of If),
    so it may read values of the enclosing scripted function (outer-scope capture).
    """

    def __init__(self, python_function: Callable[P, R]) -> None:
        self.python_function: Callable[P, R] = python_function
        self.name = python_function.__name__
        functools.update_wrapper(self, python_function)

    def __call__(self, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.python_function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<GraphFunction {self.name}>"


class ScriptDecorator(Protocol):
    """What ``script(...)`` returns: a decorator that keeps the function's signature."""

    def __call__(self, python_function: Callable[P, R], /) -> ScriptFunction[P, R]: ...


class GraphDecoratorCall(Protocol):
    """What ``graph()`` returns: a decorator that keeps the function's signature."""

    def __call__(self, python_function: Callable[P, R], /) -> GraphFunction[P, R]: ...


@overload
def script(opset: Callable[P, R]) -> ScriptFunction[P, R]: ...
@overload
def script(
    opset: Opset | None = None,
    default_opset: Opset | None = None,
    *,
    domain: str | None = None,
    name: str | None = None,
    inline: bool = False,
    ir_version: int = ...,
    producer_name: str = ...,
    producer_version: str = ...,
    doc_string: str = ...,
    metadata_props: dict[str, str] = ...,
) -> ScriptDecorator: ...


def script(
    opset: Any = None,
    default_opset: Opset | None = None,
    *,
    domain: str | None = None,
    name: str | None = None,
    inline: bool = False,
    **model_options: Any,
) -> Any:
    """Decorate a Python function so it compiles to ONNX (``@script()`` or ``@script``).

    As in onnxscript, ``opset`` is the opset the function belongs to: a custom domain
    (``Opset("pkg.custom", 1)``) names the function's domain and version; an ai.onnx
    opset (``opset18``), like ``default_opset``, pins the opset used for operators
    (``+`` -> ``Add``) and constants, which is otherwise inferred from the ops the body
    calls.  Without a custom opset the domain is ``this``, or ``domain=``.  ``name``
    renames the function; ``inline=True`` makes callers inline the body.  The model
    options ``ir_version``, ``producer_name``, ``producer_version``, ``doc_string`` and
    ``metadata_props`` become defaults of every ``to_model_proto()``.

    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script(ir_version=8, producer_name="me")
    ... def double(x: FLOAT[...]) -> FLOAT[...]:
    ...     return x + x
    """
    if callable(opset) and not isinstance(opset, Opset):
        return _with_defining_locals(ScriptFunction(opset), sys._getframe(1))
    unknown = sorted(set(model_options) - set(MODEL_OPTIONS))
    if unknown:
        from dsl.errors import DslTypeError

        raise DslTypeError(
            f"script() got unexpected keyword argument(s) {', '.join(unknown)}",
            hint=f"script() takes opset, default_opset, domain, name, inline and {', '.join(MODEL_OPTIONS)}",
        )
    for given in (opset, default_opset):
        if given is not None and not isinstance(given, Opset):
            from dsl.errors import DslTypeError

            raise DslTypeError(f"script(opset=...) takes an Opset such as opset18, not {given!r}")
    domain_version = 1
    if opset is not None and opset.domain != "":  # the function's own opset: its domain and version
        domain = opset.domain if domain is None else domain
        domain_version = opset.version
        opset = None
    chosen = opset if opset is not None else default_opset

    def decorate(python_function: Callable[..., Any]) -> ScriptFunction[..., Any]:
        made = ScriptFunction(python_function, opset=chosen, domain=DEFAULT_DOMAIN if domain is None else domain,
                              name=name, inline=inline, domain_version=domain_version,
                              model_options=model_options)
        return _with_defining_locals(made, sys._getframe(1))

    return decorate


def _with_defining_locals(function: ScriptFunction, frame: Any) -> ScriptFunction:
    """Keep the local names of the function a nested ``def`` is decorated in: under
    ``from __future__ import annotations`` its annotations are text that names them
    (``Vec = FLOAT["N"]`` defined beside it), and a name only an annotation reads is
    not in the closure."""
    if "<locals>" in getattr(function.python_function, "__qualname__", ""):
        function.defining_locals = dict(frame.f_locals)
    return function


def export_onnx_lib(functions: Any, filename: str | os.PathLike[str]) -> onnx.ModelProto:
    """Save scripted functions as a library: a model with an empty graph whose local
    functions they are (what onnxscript's ``export_onnx_lib`` writes, as there is no
    library proto in ONNX).  Returns the saved model; it passes ``onnx.checker``.

    >>> export_onnx_lib([gelu, relu6], "library.onnx")     # doctest: +SKIP
    """
    import onnx
    import onnx.checker
    import onnx.helper

    from converter.to_onnx import function_to_proto

    protos = [function_to_proto(_ir_function(f)) for f in functions]
    imports: dict[str, int] = {}
    for proto in protos:
        for opset_id in proto.opset_import:
            imports[opset_id.domain] = max(imports.get(opset_id.domain, 0), opset_id.version)
    for function in functions:
        domain = function.domain if isinstance(function, ScriptFunction) else _ir_function(function).domain
        imports.setdefault(domain, getattr(function, "domain_version", 1))
    imports.setdefault("", 1)
    model = onnx.helper.make_model(
        onnx.helper.make_graph([], "library", [], []),
        functions=protos,
        opset_imports=[onnx.helper.make_opsetid(domain, version) for domain, version in sorted(imports.items())],
        producer_name="onnxquill",
    )
    from dsl.onnxruntime_limits import loadable

    model = loadable(model)
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as error:
        from dsl.errors import ConversionError

        raise ConversionError(
            f"these functions cannot share one library: {str(error).strip().splitlines()[0]}",
            hint="a model imports one version of each opset: compile them all against one, "
            "@script(default_opset=opset18)",
        ) from None
    onnx.save(model, os.fspath(filename))
    return model


class _GraphDecorator(GraphDecorator):
    """Decorate a nested function to be passed as a subgraph attribute (Loop/Scan/If body).

    >>> from dsl import graph, BOOL, FLOAT, INT64                                  # doctest: +SKIP
    >>> @graph()                                                                  # doctest: +SKIP
    ... def body(i: INT64, keep_going: BOOL, x: FLOAT[...]) -> tuple[BOOL, FLOAT[...]]:
    ...     return keep_going, x + 1.0
    """

    __slots__ = ()

    def __call__(self) -> GraphDecoratorCall:
        return GraphFunction

    def __repr__(self) -> str:
        return "<dsl.graph>"


graph = _GraphDecorator()
