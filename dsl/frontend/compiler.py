"""The compiler of one scripted function: ties source, scopes, builders and visitors together.

Each kind of Python construct is handled by a mixin in its own module (expressions,
calls, statements, control flow, subgraphs), one ``visit_<Kind>`` method per ``ast``
node kind (found by name: ``visit_BinOp`` for ``ast.BinOp``), each raising errors
against the node it visits.  This class holds the state they share: the current graph
builder, the current scope, and the namespace the function was defined in.  A call of a
scripted function that has no IR yet compiles it first, with a nested compiler
(:func:`kept_function`), whose result the caller's ``finish`` completes and the callee
keeps.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from typing import Any

import numpy as np

from dsl import ir
from dsl.annotation_checks import (
    NOT_A_TENSOR_HINT,
    OUTPUT_HINT,
    check_declared,
    check_output_elem,
    inputs_fix_ranks,
    output_label,
)
from dsl.errors import DslError, DslNameError, DslSyntaxError, DslTypeError, UnsupportedSyntaxError
from dsl.frontend.bindings import AttrRef, GraphDef, PyValue, Undefined, ValueTuple
from dsl.frontend.builder import CompileContext, GraphBuilder
from dsl.frontend.calls import CallCompiler
from dsl.frontend.constants import array_data, literal_tensor
from dsl.frontend.control_flow import ControlFlowCompiler
from dsl.frontend.exits import ReturnExit
from dsl.frontend.expressions import ExpressionCompiler
from dsl.frontend.opset_choice import imported_onnx_opset, referenced_opsets
from dsl.frontend.origin import MISSING, Origin
from dsl.frontend.python_values import holds_tensor
from dsl.frontend.scope import Scope
from dsl.frontend.scripted import CompiledFunction, Finish, Loaded, Scripted
from dsl.frontend.signature import Parameter, read_signature
from dsl.frontend.source import function_source
from dsl.frontend.statements import StatementCompiler
from dsl.frontend.static_python import StaticPythonCompiler
from dsl.frontend.subgraphs import SubgraphCompiler
from dsl.frontend.tensor_properties import has_symbolic_size, lower_sizes
from dsl.frontend.weights import Initializer, attach_input_default, initializer_operand
from dsl.opsets import Opset, get_opset

__all__ = ["FunctionCompiler", "compile_function", "kept_function"]

_SCALARS = (bool, int, float, str)
_INT64 = 7  # the ONNX element type of sizes


class FunctionCompiler(
    ExpressionCompiler, CallCompiler, StatementCompiler, ControlFlowCompiler, SubgraphCompiler, StaticPythonCompiler
):
    """Compiles one :class:`Scripted` function into a :class:`CompiledFunction`.

    ``finish`` runs the passes on what a nested compile of a callee makes; ``opset``
    overrides the function's own pin (an inline callee compiled for its caller);
    ``callers`` are the functions whose compiles this one is nested in.
    """

    def __init__(
        self, script_function: Scripted, finish: Finish, opset: Opset | None = None,
        callers: tuple[Scripted, ...] = (),
    ) -> None:
        self.script_function = script_function
        self.finish = finish
        self.pinned_opset = opset if opset is not None else script_function.opset
        self.compiling = (*callers, script_function)
        python_function = script_function.python_function
        source = function_source(python_function)
        self.origin = Origin(python_function, source, getattr(script_function, "defining_locals", None))
        self.tree = source.tree
        self.loop_depth = 0
        self.while_conditions: list[ir.Value] = []  # for the prune-loop-carried pass (CompiledFunction)
        self.declared_outputs: list[Any] | None = None
        self.inline_callees: list[ir.Function] = []
        self.callee_imports: dict[str, int] = {}
        self.current_statement: ast.stmt | None = None  # for locating internal errors
        self._locations: dict[Any, ir.SourceLocation] = {}
        self.visitors: dict[type, Callable[[Any, Any], Any]] = {}  # ast kind -> visit_<Kind> (find_visitor)
        # Python evaluated while compiling (StaticPythonCompiler, ControlFlowCompiler.enter)
        self.synthetic: dict[str, Any] = {}  # "@itemN" -> an item of *args spelled out
        self.made_containers: dict[int, tuple[Any, int]] = {}  # id -> (container, dynamic_depth made at)
        self.dynamic_depth = 0  # If branches and Loop bodies entered
        self.helper_depth = 0  # plain Python functions being compiled in place
        self.helper_sources: dict[Any, Any] = {}  # helper -> (signature, FunctionSource)
        opset = self._choose_opset()
        self.ctx = CompileContext(opset)
        self.builder = GraphBuilder(self.ctx, script_function.name)
        self.scope = Scope()

    # ------------------------------------------------------------------ helpers
    def find_visitor(self, node: ast.AST) -> Callable[[Any, Any], Any] | None:
        """The ``visit_<Kind>`` method for ``node`` (None: the syntax is not supported),
        looked up by name once per kind and compile, then kept in ``visitors``."""
        found = getattr(type(self), "visit_" + type(node).__name__, None)
        if found is not None:
            self.visitors[type(node)] = found
        return found

    def loc(self, node: Any) -> ir.SourceLocation:
        found = self._locations.get(node)
        if found is None:
            found = self._locations[node] = self.origin.source.location(node)
        return found

    def resolve_name(self, name: str, node: ast.AST) -> Any:
        binding = self.scope.lookup(name)
        if binding is not None:
            if isinstance(binding, Undefined):
                raise DslNameError(binding.reason, self.loc(node), hint=binding.hint)
            return binding
        outer = self.origin.operands.get(name)
        if outer is not None:
            return outer
        if name.startswith("@"):  # an item of *args spelled out (StaticPythonCompiler.expand_starred)
            return self.synthetic[name]
        found = self.origin.resolve(name)
        if found is MISSING:
            known = list(self._visible_names())
            close = difflib.get_close_matches(name, known, n=2)
            raise DslNameError(
                f"name {name!r} is not defined",
                self.loc(node),
                hint=(f"did you mean {' or '.join(close)}? " if close else "")
                + "assign it before use, or define it at module level",
            )
        if isinstance(found, Initializer):  # a weight: an initializer, not a Constant
            return initializer_operand(self, found)
        operand = self.origin.operands[name] = PyValue(found)
        return operand

    def _visible_names(self) -> list[str]:
        names: list[str] = []
        scope: Scope | None = self.scope
        while scope is not None:
            names.extend(scope.names)
            scope = scope.parent
        names.extend(self.origin.closure)
        names.extend(self.origin.globals)
        return names

    def _choose_opset(self) -> Any:
        pinned = self.pinned_opset
        code = self.script_function.python_function.__code__
        found, callees = referenced_opsets(code, self.tree, self._resolve_for_scan, self.loc)
        onnx_use = found.get("")
        if pinned is not None and pinned.domain == "":
            if onnx_use is not None and onnx_use != pinned.version:
                raise DslTypeError(
                    f"script(opset={pinned.describe()}) but the body uses ai.onnx opset {onnx_use}",
                    self.loc(self.tree),
                    hint=f"call ops through opset{pinned.version}, or drop opset= from script()",
                )
            return pinned
        if onnx_use is not None:
            return get_opset("", onnx_use)
        for callee in callees:  # no op of its own: follow the functions and models it calls
            if isinstance(callee, Loaded):
                return get_opset("", callee.opset_version)
            if not self.is_compiling(callee):
                version = self.compiled_callee(callee).opset_imports.get("")
                if version is not None:
                    return get_opset("", version)
        imported = imported_onnx_opset({**self.origin.globals, **self.origin.closure})
        if imported is not None:  # ``from dsl import opset18 as op`` with Python operators only
            return imported
        from dsl.onnxruntime_limits import max_opset

        return get_opset("", max_opset())

    def is_compiling(self, scripted: Any) -> bool:
        """Whether ``scripted`` is this function or one whose compile this one is nested in
        (so calling it would be recursion)."""
        return any(f is scripted for f in self.compiling)

    def compiled_callee(self, callee: Scripted, opset: Opset | None = None) -> ir.Function:
        """The finished IR of a called function: the one kept in its slot, compiled here
        (nested) when it has none yet; with ``opset``, compiled against that opset for
        this caller alone and not kept."""
        if opset is None:
            return kept_function(callee, self.finish, self.compiling)
        return compile_function(callee, self.finish, opset, self.compiling)

    def _resolve_for_scan(self, name: str) -> Any:
        found = self.origin.resolve(name)
        return None if found is MISSING else found

    # ------------------------------------------------------- operand conversion
    def as_value(
        self, operand: Any, node: Any, beside: ir.Value | None = None, elem: int | None = None
    ) -> ir.Value:
        """The tensor an operand stands for, making constants where needed.

        A Python literal takes the element type ``elem`` or that of ``beside``; when
        ``beside`` has an unknown type the constant is wrapped in ``CastLike``.
        """
        if isinstance(operand, ir.Value):
            return operand
        ctx = self.ctx
        if isinstance(operand, PyValue):
            value = array_data(operand.value)
            if isinstance(value, (list, tuple, dict)) and holds_tensor(value):
                return self.container_as_value(value, node)
            if value is None:
                raise DslTypeError("None cannot be used as a tensor here", self.loc(node),
                                   hint="None only stands for an omitted optional input of an op")
            location = self.loc(node)
            if has_symbolic_size(value):  # x.shape[0], or a list of sizes, used as a tensor
                sizes = lower_sizes(self.builder, value, location)
                want = elem if elem is not None else ctx.elem(beside)
                if want is not None and want != _INT64:
                    return self.builder.operator("Cast", [sizes], location, to=want)
                return sizes
            scalar = type(value) in _SCALARS
            if not scalar and _is_numpy(value) and value.size > 16:  # a weight: find it by identity, not by its bytes
                key = ("numpy", id(value))
                constant = self.builder.find_constant(key)
                if constant is None:
                    constant = self.builder.constant(literal_tensor(value, None, location), location)
                    self.builder.remember_constant(key, constant)
                return constant
            beside_elem = elem if elem is not None else ctx.elem(beside)
            scalar_key = None
            constant = None
            if scalar:  # the same literal again: skip building its tensor
                scalar_key = ("scalar", type(value), value, beside_elem)
                constant = self.builder.find_constant(scalar_key)
            if constant is None:
                tensor = literal_tensor(value, beside_elem, location)
                constant = self.builder.constant(tensor, location)
                if scalar_key is not None:
                    self.builder.remember_constant(scalar_key, constant)
            if beside is not None and beside_elem is None and (scalar or not _is_numpy(value)):
                return self.builder.operator("CastLike", [constant, beside], location)
            return constant
        if isinstance(operand, AttrRef):
            location = self.loc(node)
            constant = self.builder.constant_of_param(operand.param, location)
            want = elem if elem is not None else ctx.elem(beside)
            have = ctx.elem(constant)
            if want is not None and have is not None and want != have:
                return self.builder.operator("Cast", [constant], location, to=want)
            if want is None and beside is not None:
                return self.builder.operator("CastLike", [constant, beside], location)
            return constant
        if isinstance(operand, ValueTuple):
            raise DslTypeError(
                f"{len(operand.items)} values where one tensor is expected", self.loc(node),
                hint="unpack them first: a, b = ...",
            )
        if isinstance(operand, GraphDef):
            raise DslTypeError(f"the @graph function {operand.tree.name!r} is not a tensor", self.loc(node),
                               hint="pass @graph functions as attributes (body=..., then_branch=...)")
        raise DslTypeError(f"{operand!r} cannot be used as a tensor", self.loc(node))

    def container_as_value(self, value: Any, node: Any) -> ir.Value:
        """A Python list where a tensor is expected: numbers, symbolic sizes and integer
        tensors of rank 0 or 1 (``repeats`` holding tensors, for Tile) are one 1-D tensor
        (:meth:`list_tensor`); anything else in it is an error."""
        items = [self.operand(item) for item in value] if isinstance(value, (list, tuple)) else []
        items = [self.as_value(item, node) if isinstance(item, PyValue) and has_symbolic_size(item.value) else item
                 for item in items]
        if items and all(isinstance(item, ir.Value) or (
                isinstance(item, PyValue) and isinstance(item.value, (int, float, np.integer, np.floating)))
                for item in items):
            if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) == len(items):
                texts = [ast.unparse(element) for element in node.elts]
            else:
                texts = [f"{ast.unparse(node)}[{index}]" for index in range(len(items))]
            synthetic = ast.copy_location(ast.List(elts=[node] * len(items), ctx=ast.Load()), node)
            return self.list_tensor(items, synthetic, texts)
        raise DslTypeError(
            f"a {type(value).__name__} of tensors is not a tensor", self.loc(node),
            hint=NOT_A_TENSOR_HINT,
        )

    def bind_name(self, name: str, operand: Any) -> None:
        """Bind a Python name; a fresh unnamed result takes the variable's name."""
        if isinstance(operand, ir.Value) and operand in self.ctx.auto_named and operand in self.builder.produced:
            self.ctx.rename(operand, name.lstrip("@"))
        self.scope.names[name] = operand

    def output_value(self, value: ir.Value, taken: set[ir.Value], location: Any) -> ir.Value:
        """``value`` as an output of the current graph: Identity when it is not computed
        here (an input, an outer value) or is already an output."""
        if value not in self.builder.produced or value in taken:
            value = self.builder.operator("Identity", [value], location)
        taken.add(value)
        return value

    # ------------------------------------------------------------------- driver
    def compile(self) -> CompiledFunction:
        script_function = self.script_function
        tree = self.tree
        if isinstance(tree, ast.AsyncFunctionDef):
            raise UnsupportedSyntaxError(f"async def {tree.name} cannot be scripted", self.loc(tree),
                                         hint="scripted functions are not coroutines; use a plain def")
        self.builder.graph.location = self.loc(tree)
        defaults = _defaults(script_function.python_function)
        signature = read_signature(
            tree,
            getattr(script_function.python_function, "__annotations__", None),
            defaults,
            self.origin.evaluate,
            self.loc,
        )
        attr_params = self._bind_parameters(signature.parameters, defaults)
        if signature.output_types is not None:
            self.declared_outputs = signature.output_types
        body = tree.body
        doc_string = ast.get_docstring(tree) or ""
        if body and _is_docstring(body[0]):
            body = body[1:]
        outcome = self.compile_block(body)
        if not isinstance(outcome, ReturnExit):
            last = body[-1] if body else tree
            raise DslSyntaxError(
                f"{tree.name} does not return a value" if outcome is None else f"{tree.name} ends in a jump",
                self.loc(last),
                hint="end the function with 'return <tensor>' (every path must return)",
            )
        self._set_outputs(outcome, signature.output_types)
        graph = self.builder.graph
        self.ctx.finalize_names(graph)
        opset_imports = {domain: version for domain, (version, _) in self.ctx.opsets_used.items()}
        opset_imports.setdefault("", self.ctx.default_opset.version)
        for domain, version in self.callee_imports.items():
            opset_imports.setdefault(domain, version)
        function = ir.Function(
            script_function.name,
            graph,
            domain=script_function.domain,
            attr_params=attr_params,
            opset_imports=opset_imports,
            doc_string=doc_string,
            location=self.loc(tree),
        )
        return CompiledFunction(function, self.inline_callees, self.while_conditions)

    def _bind_parameters(self, parameters: list[Parameter], defaults: dict[str, Any]) -> list[ir.AttrParam]:
        """Tensor parameters become graph inputs, the others attribute parameters."""
        graph = self.builder.graph
        attr_params: list[ir.AttrParam] = []
        for parameter in parameters:
            if parameter.attr_kind is None:
                value = self.ctx.new_value(parameter.name, parameter.location, type=parameter.type)
                graph.inputs.append(value)
                attach_input_default(self, value, defaults.get(parameter.name))
                self.scope.bind(parameter.name, value)
            else:
                param = ir.AttrParam(parameter.name, parameter.attr_kind, parameter.default, parameter.location)
                attr_params.append(param)
                self.scope.bind(parameter.name, AttrRef(param))
        return attr_params

    def _set_outputs(self, outcome: ReturnExit, output_types: list[Any] | None) -> None:
        location = outcome.location
        if output_types is not None and len(output_types) != len(outcome.values):
            raise DslTypeError(
                f"the function returns {len(outcome.values)} value(s) but its annotation declares "
                f"{len(output_types)}",
                location,
                hint="make the return statement and the return annotation agree",
            )
        graph = self.builder.graph
        taken: set[ir.Value] = set()
        ranks_fixed = inputs_fix_ranks([value.type for value in graph.inputs])
        for index, (value, name) in enumerate(zip(outcome.values, outcome.names)):
            declared = output_types[index] if output_types is not None else None
            known = self.ctx.elem(value)
            check_output_elem(index, known, declared, location)
            check_declared(output_label(index, name), self.ctx.shapes.shape(value), known, declared, location,
                           OUTPUT_HINT, check_rank=ranks_fixed)
            shape = self.ctx.shapes.shape(value)
            carried_out = value.producer is not None and value.producer.op_type == "Loop" and \
                value.producer.domain in ("", "ai.onnx")
            value = self.output_value(value, taken, location)
            self._claim_name(value, name)
            if isinstance(declared, ir.TensorType) and declared.shape is not None and not ranks_fixed and (
                    shape is None or len(shape) != len(declared.shape)):
                # Inputs of any rank: the annotation's rank is not a promise (not checked, as
                # eagerly); the model's output takes the element type and inference's rank.
                value.type = ir.TensorType(declared.elem_type, None)
            elif declared is not None:
                value.type = declared
            elif value.type is None and known is not None:
                # A Loop's carried result keeps the rank the compiler found invariant, which
                # ONNX's inference cannot tell (a model's outputs need one); otherwise the
                # rank and sizes are left to ONNX's inference, which knows them better.
                rank = (None,) * len(shape) if carried_out and shape is not None else None
                value.type = ir.TensorType(known, rank)
            graph.outputs.append(value)

    def _claim_name(self, value: ir.Value, name: str) -> None:
        """Give an output the Python name it was returned under (made unique at the end)."""
        self.ctx.auto_named.discard(value)
        value.name = name


def _is_numpy(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic))


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _defaults(python_function: Any) -> dict[str, Any]:
    code = python_function.__code__
    names = code.co_varnames[: code.co_argcount]
    positional = python_function.__defaults__ or ()
    found = dict(zip(names[len(names) - len(positional) :], positional))
    found.update(python_function.__kwdefaults__ or {})
    return found


def compile_with_safety_net(
    script_function: Scripted, finish: Finish, opset: Opset | None = None, callers: tuple[Scripted, ...] = ()
) -> CompiledFunction:
    """Run the compiler; an unexpected internal exception becomes a located DslError."""
    compiler: FunctionCompiler | None = None
    try:
        compiler = FunctionCompiler(script_function, finish, opset, callers)
        return compiler.compile()
    except DslError:
        raise
    except RecursionError:
        raise DslSyntaxError(
            "the function nests too deeply to compile", _where(compiler),
            hint="split deeply nested expressions into several statements",
        ) from None
    except Exception as err:
        raise DslError(
            f"internal error while compiling {getattr(script_function, 'name', '?')}: {type(err).__name__}: {err}",
            _where(compiler),
            hint="this is a bug in onnxquill; please report it with this function",
        ) from err


def compile_function(
    script_function: Scripted, finish: Finish, opset: Opset | None = None, callers: tuple[Scripted, ...] = ()
) -> ir.Function:
    """Compile ``script_function`` and let ``finish`` run the passes it asks for; nothing is kept.

    ``opset`` overrides its pinned opset; ``callers`` are the compiles this one is nested
    in (to refuse recursion).
    """
    return finish(compile_with_safety_net(script_function, finish, opset, callers))


def kept_function(script_function: Scripted, finish: Finish, callers: tuple[Scripted, ...] = ()) -> ir.Function:
    """The finished IR kept in ``script_function.compiled``, compiled (once, under its
    lock) when the slot is empty."""
    found = script_function.compiled
    if found is None:
        with script_function.compile_lock:
            found = script_function.compiled
            if found is None:
                found = script_function.compiled = compile_function(script_function, finish, None, callers)
    return found


def _where(compiler: FunctionCompiler | None) -> Any:
    if compiler is None or compiler.current_statement is None:
        return None
    try:
        return compiler.loc(compiler.current_statement)
    except Exception:  # the location itself is what failed
        return None
