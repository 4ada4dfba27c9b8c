"""Python run while compiling: loops over Python values, comprehensions, helpers, asserts.

What does not depend on a tensor's data runs as Python while a ``@script`` body
compiles, as it would eagerly (Triton's ``constexpr``/``static_range`` and JAX's static
arguments are the same idea): a ``for`` over a list, a tuple, ``enumerate``/``zip``/
``reversed`` or a dict is unrolled, a comprehension builds its Python list, a plain
Python function called with tensors has its body compiled in place (with its own
source locations), and ``assert`` on a value known while compiling is checked then.
What needs a tensor's data keeps becoming an If or a Loop; what cannot be either is a
:class:`dsl.errors.DslError` at the user's line naming what to write instead.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
from typing import TYPE_CHECKING, Any

from dsl import ir
from dsl.errors import DslError, DslSyntaxError, DslTypeError, StaticAssertionError, UnsupportedSyntaxError
from dsl.frontend.bindings import AttrRef, PyValue, ValueTuple
from dsl.frontend.exits import ReturnExit
from dsl.frontend.python_values import (
    CONTAINER_METHODS,
    CONTAINER_TYPES,
    MUTATING_METHODS,
    STRUCTURAL_BUILTINS,
    is_user_function,
    operand_of,
    raw_of,
)
from dsl.frontend.scope import Scope

if TYPE_CHECKING:  # the other mixins, as mypy sees them (see dsl.frontend.surface)
    from dsl.frontend.surface import CompilerSurface as _CompilerBase
else:
    _CompilerBase = object

__all__ = ["StaticPythonCompiler"]

_MAX_ITEMS = 100_000  # a loop unrolled or a comprehension built from more items is refused
_MAX_HELPER_DEPTH = 48
_CONTINUE = "@continue"


class StaticPythonCompiler(_CompilerBase):
    """Mixin of :class:`dsl.frontend.compiler.FunctionCompiler` for Python evaluated while compiling."""

    # ------------------------------------------------------------ operands
    def weight_operand(self, weight: Any) -> ir.Value:
        from dsl.frontend.weights import initializer_operand

        return initializer_operand(self, weight)

    def operand(self, value: Any) -> Any:
        """The operand a Python object read while compiling stands for."""
        return operand_of(value, self.weight_operand)

    def static_items(self, operand: Any, node: ast.AST, what: str) -> list[Any]:
        """The items of an iterable known while compiling, as Python objects."""
        if isinstance(operand, ValueTuple):
            return [raw_of(item) for item in operand.items]
        if isinstance(operand, PyValue):
            try:
                items = list(itertools.islice(iter(operand.value), _MAX_ITEMS + 1))
            except TypeError:
                raise DslTypeError(f"{type(operand.value).__name__} is not iterable", self.loc(node),
                                   hint=f"{what} over a list, a tuple, a dict or range(...)") from None
            except DslError as err:
                raise err.with_location(self.loc(node)) from None
            if len(items) > _MAX_ITEMS:
                raise DslTypeError(f"{what} over more than {_MAX_ITEMS} Python items", self.loc(node),
                                   hint="use a loop over range(n) with a tensor bound (an ONNX Loop)")
            return items
        raise UnsupportedSyntaxError(
            f"{what} over a tensor needs its values at run time", self.loc(node),
            hint=_LOOP_OVER_TENSOR_HINT,
        )

    def new_synthetic(self, operand: Any, like: ast.AST) -> ast.Name:
        """A name node standing for an operand (an item of ``*args``), placed at ``like``."""
        name = f"@item{len(self.synthetic)}"
        self.synthetic[name] = operand
        return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), like)

    def expand_starred(self, node: ast.Call) -> ast.Call:
        """``f(*parts, **options)`` with parts and options known while compiling, spelled out."""
        if not any(isinstance(a, ast.Starred) for a in node.args) and all(k.arg is not None for k in node.keywords):
            return node
        args: list[ast.expr] = []
        for argument in node.args:
            if not isinstance(argument, ast.Starred):
                args.append(argument)
                continue
            items = self.static_items(self.expr(argument.value), argument, "*args")
            args.extend(self.new_synthetic(self.operand(item), argument) for item in items)
        keywords: list[ast.keyword] = []
        for keyword in node.keywords:
            if keyword.arg is not None:
                keywords.append(keyword)
                continue
            mapping = raw_of(self.expr(keyword.value))
            if not isinstance(mapping, dict) or not all(isinstance(k, str) for k in mapping):
                raise DslTypeError("**kwargs needs a dict with str keys known while compiling", self.loc(keyword),
                                   hint="pass each attribute by name")
            for key, value in mapping.items():
                keywords.append(ast.copy_location(ast.keyword(arg=key, value=self.new_synthetic(
                    self.operand(value), keyword.value)), keyword))
        expanded = ast.copy_location(ast.Call(func=node.func, args=args, keywords=keywords), node)
        expanded.end_lineno, expanded.end_col_offset = node.end_lineno, node.end_col_offset
        return expanded

    # ------------------------------------------------------ loops unrolled
    def unroll_for(self, node: ast.For, items: list[Any]) -> Any:
        """A ``for`` over Python items: the body compiled once per item, as Python runs it."""
        before = self.scope.names.get(_CONTINUE)
        broke = False
        try:
            for item in items:
                self.scope.names[_CONTINUE] = PyValue(True)
                self.assign(node.target, self.operand(item), node.iter)
                outcome = self.compile_block(node.body)
                if isinstance(outcome, ReturnExit):
                    return outcome
                flag = self.scope.names.get(_CONTINUE)
                if isinstance(flag, PyValue):
                    if not flag.value:
                        broke = True
                        break
                    continue
                raise UnsupportedSyntaxError(
                    "break under a condition computed from tensors, in a loop over Python values", self.loc(node),
                    hint="loop over range(n) with a tensor bound (an ONNX Loop), or decide the break on "
                    "values known while compiling",
                )
        finally:
            if before is None:
                self.scope.names.pop(_CONTINUE, None)
            else:
                self.scope.names[_CONTINUE] = before
        if node.orelse and not broke:
            return self.compile_block(node.orelse)
        return None

    # ------------------------------------------------------ comprehensions
    def comprehension_items(self, generators: list[ast.comprehension], produce: Any) -> None:
        """Run the ``for``/``if`` clauses of a comprehension in its own scope, calling
        ``produce()`` for each combination that passes the conditions."""
        saved = self.scope
        self.scope = Scope(saved)
        try:
            self._generate(generators, 0, produce)
        finally:
            self.scope = saved

    def _generate(self, generators: list[ast.comprehension], index: int, produce: Any) -> None:
        if index == len(generators):
            produce()
            return
        clause = generators[index]
        if clause.is_async:
            raise UnsupportedSyntaxError("async comprehensions are not supported", self.loc(clause.iter),
                                         hint="use a plain for clause")
        for item in self.static_items(self.expr(clause.iter), clause.iter, "a comprehension"):
            self.assign(clause.target, self.operand(item), clause.iter)
            if all(self.static_truth(condition, "a comprehension's if") for condition in clause.ifs):
                self._generate(generators, index + 1, produce)

    def static_truth(self, node: ast.expr, what: str) -> bool:
        operand = self.expr(node)
        if not isinstance(operand, PyValue):
            raise DslTypeError(f"{what} on a tensor needs its value at run time", self.loc(node),
                               hint="decide on values known while compiling; select tensors with op.Where")
        return self.truth(operand, node)

    def comprehension_list(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> list[Any]:
        found: list[Any] = []
        self.comprehension_items(node.generators, lambda: found.append(raw_of(self.expr(node.elt))))
        return found

    def visit_ListComp(self, node: ast.ListComp) -> Any:
        return PyValue(self.made_here(self.comprehension_list(node)))

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        return PyValue(iter(self.comprehension_list(node)))

    def visit_SetComp(self, node: ast.SetComp) -> Any:
        return self.fold(set, (self.comprehension_list(node),), node)

    def visit_DictComp(self, node: ast.DictComp) -> Any:
        found: dict[Any, Any] = {}

        def produce() -> None:
            key = self.expr(node.key)
            if not isinstance(key, PyValue):
                raise DslTypeError("a dict key must be known while compiling", self.loc(node.key),
                                   hint="use str or int keys")
            found[key.value] = raw_of(self.expr(node.value))

        self.comprehension_items(node.generators, produce)
        return PyValue(self.made_here(found))

    def visit_Dict(self, node: ast.Dict) -> Any:
        found: dict[Any, Any] = {}
        for key_node, value_node in zip(node.keys, node.values):
            value = raw_of(self.expr(value_node))
            if key_node is None:  # {**other}
                if not isinstance(value, dict):
                    raise DslTypeError("** in a dict display needs a dict", self.loc(value_node),
                                       hint="spread a dict known while compiling: {**settings, \"k\": v}")
                found.update(value)
                continue
            key = self.expr(key_node)
            if not isinstance(key, PyValue):
                raise DslTypeError("a dict key must be known while compiling", self.loc(key_node),
                                   hint="use str or int keys")
            try:
                found[key.value] = value
            except TypeError as err:
                raise DslTypeError(f"this dict key cannot be used: {err}", self.loc(key_node),
                                   hint="use str or int keys") from None
        return PyValue(self.made_here(found))

    def visit_Set(self, node: ast.Set) -> Any:
        items = [self.expr(item) for item in node.elts]
        if not all(isinstance(item, PyValue) for item in items):
            raise DslTypeError("a set of tensors is not supported", self.loc(node), hint="use a list")
        return self.fold(set, ([item.value for item in items],), node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        """An f-string of values known while compiling (``W[f"layers.{i}.wq"]``)."""
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            if not isinstance(value, ast.FormattedValue):
                raise self.unsupported(node)
            operand = self.expr(value.value)
            if not isinstance(operand, PyValue):
                raise UnsupportedSyntaxError("an f-string of a tensor needs its value at run time", self.loc(value.value),
                                   hint="format values known while compiling only")
            item = operand.value
            if value.conversion == 115:
                item = str(item)
            elif value.conversion == 114:
                item = repr(item)
            elif value.conversion == 97:
                item = ascii(item)
            spec = "" if value.format_spec is None else self.visit_JoinedStr(value.format_spec).value  # type: ignore[arg-type]
            parts.append(self.fold(format, (item, spec), value).value)
        return PyValue("".join(parts))

    def made_here(self, container: Any) -> Any:
        """Record a container made by the body, and the control-flow depth it was made at:
        only there may it grow (see :meth:`check_mutation`)."""
        self.made_containers[id(container)] = (container, self.dynamic_depth)
        return container

    def check_mutation(self, container: Any, method: str, node: ast.AST) -> None:
        """A container changed inside an If branch or a Loop body must have been made
        there: the branch or body runs at run time, not once per Python evaluation."""
        depth = self.dynamic_depth
        if depth == 0:
            return
        made = self.made_containers.get(id(container))
        if made is not None and made[0] is container and made[1] == depth:
            return
        raise UnsupportedSyntaxError(
            f".{method}() on a Python container made outside this if/loop, inside a branch or a loop body "
            "decided by tensors",
            self.loc(node),
            hint="collect values in a loop over Python values (for w in layers, range(n) with a constant n), "
            "or assign a new name in every branch",
        )

    # --------------------------------------------------------------- assert
    def visit_Assert(self, node: ast.Assert) -> None:
        test = self.expr(node.test)
        if not isinstance(test, PyValue):
            raise UnsupportedSyntaxError(
                "assert on a tensor needs its value at run time", self.loc(node.test),
                hint="assert on values known while compiling (sizes, flags, Python arguments); "
                "check tensor values outside the model",
            )
        if self.truth(test, node.test):
            return None
        message = ""
        if node.msg is not None:
            detail = self.expr(node.msg)
            message = f": {detail.value}" if isinstance(detail, PyValue) else ""
        raise StaticAssertionError(f"assertion failed while compiling{message}", self.loc(node),
                                   hint="the assert holds on values known while compiling; fix them or the assert")

    # -------------------------------------------------------------- helpers
    def call_helper(self, function: Any, bound_self: Any, node: ast.Call, operands: list[Any],
                    keyword_operands: dict[str, Any]) -> Any:
        """A plain Python function called with tensors: its body compiled in place."""
        from dsl.frontend.origin import Origin
        from dsl.frontend.source import function_source

        location = self.loc(node)
        depth = self.helper_depth
        if depth >= _MAX_HELPER_DEPTH:
            raise DslTypeError(f"Python functions nest more than {_MAX_HELPER_DEPTH} calls deep here", location,
                               hint="recursion needs a bound known while compiling")
        arguments = [raw_of(a) for a in operands]
        keywords = {k: raw_of(v) for k, v in keyword_operands.items()}
        if bound_self is not None:
            arguments.insert(0, bound_self)
        name = getattr(function, "__qualname__", getattr(function, "__name__", "function"))
        # One parse and one signature per helper and compile, however often it is called.
        known = self.helper_sources
        found = known.get(function)
        if found is None:
            try:
                found = known[function] = (inspect.signature(function), function_source(function))
            except DslError as err:
                raise err.with_location(location) from None
        signature, source = found
        if isinstance(source.tree, ast.AsyncFunctionDef):
            raise UnsupportedSyntaxError(f"async def {name} cannot be called in @script", location,
                                         hint="make the helper a plain def")
        scope = Scope()
        for parameter_name, value in _bind(function, signature, arguments, keywords, name, location).items():
            scope.bind(parameter_name, self.operand(value))
        saved = (self.origin, self.scope, self.declared_outputs, self.loop_depth, self.current_statement)
        self.origin, self.scope, self.declared_outputs, self.loop_depth = Origin(function, source), scope, None, 0
        self.helper_depth = depth + 1
        try:
            outcome = self.compile_block(source.tree.body)
        finally:
            self.origin, self.scope, self.declared_outputs, self.loop_depth, self.current_statement = saved
            self.helper_depth = depth
        if outcome is None:
            return PyValue(None)
        if not isinstance(outcome, ReturnExit):
            raise DslSyntaxError(f"{name} ends in a jump", location, hint="end the helper with return")
        if outcome.packed:
            return ValueTuple(tuple(outcome.values))
        return outcome.values[0]

    def helper_return(self, node: ast.Return) -> ReturnExit:
        """``return`` in a helper: any operand (a tensor, a list of them, a number)."""
        location = self.loc(node)
        if node.value is None:
            return ReturnExit([PyValue(None)], ["return_val"], location)
        operand = self.expr(node.value)
        if isinstance(operand, ValueTuple):
            return ReturnExit(list(operand.items), ["return_val"] * len(operand.items), location, packed=True)
        return ReturnExit([operand], ["return_val"], location)

    def python_sum(self, operands: list[Any], node: ast.Call) -> Any:
        """``sum(parts)`` over tensors: ``start + parts[0] + parts[1] ...``, as Python adds them."""
        total = operands[1] if len(operands) > 1 else PyValue(0)
        for item in self.static_items(operands[0], node, "sum()"):
            addend = self.operand(item)
            if isinstance(total, PyValue) and isinstance(addend, PyValue):
                total = self.fold(lambda a, b: a + b, (total.value, addend.value), node)
            else:
                total = self.binary("Add", total, addend, node)
        return total

    def python_call(self, target: Any, node: ast.Call, operands: list[Any], keyword_operands: dict[str, Any]) -> Any:
        """A Python callable called with tensors or containers of them, as eager mode calls it."""
        if is_user_function(target):
            return self.call_helper(target, None, node, operands, keyword_operands)
        method_function = getattr(target, "__func__", None)
        if inspect.ismethod(target) and is_user_function(method_function):
            return self.call_helper(method_function, target.__self__, node, operands, keyword_operands)
        call_method = vars(type(target)).get("__call__")  # defined by the class itself
        if not isinstance(target, type) and is_user_function(call_method):  # an object of the user's class
            return self.call_helper(call_method, target, node, operands, keyword_operands)
        if target is builtins.sum and operands and not keyword_operands:
            return self.python_sum(operands, node)
        owner = getattr(target, "__self__", None)
        name = getattr(target, "__name__", None)
        container_method = isinstance(owner, CONTAINER_TYPES) and name in CONTAINER_METHODS
        structural = _is_structural(target, STRUCTURAL_BUILTINS)
        if not (container_method or structural):
            label = getattr(target, "__name__", type(target).__name__)
            raise DslTypeError(
                f"the Python function {label} cannot be applied to tensors inside @script",
                self.loc(node),
                hint="use ONNX ops (op.X) on tensors; functions of your own code are compiled in place, "
                "library functions only run on values known while compiling",
            )
        arguments = [raw_of(a) for a in operands]
        keywords = {k: raw_of(v) for k, v in keyword_operands.items()}
        if container_method and name in MUTATING_METHODS:
            self.check_mutation(owner, str(name), node)
        if target in _ITERATING and any(isinstance(a, ir.Value) for a in arguments):
            raise UnsupportedSyntaxError(  # (as `for v in x`: see static_items)
                f"{name}() over a tensor needs its values at run time", self.loc(node),
                hint=_LOOP_OVER_TENSOR_HINT,
            )
        if target is builtins.abs and len(arguments) == 1 and not keywords and isinstance(arguments[0], ir.Value):
            return self.builder.operator("Abs", [arguments[0]], self.loc(node))  # (as eagerly: EagerTensor.__abs__)
        if target in _VALUE_READING and any(isinstance(a, (ir.Value, AttrRef)) for a in arguments):
            raise DslTypeError(
                f"{name}() of a tensor needs its value at run time", self.loc(node),
                hint={"len": "use op.Shape(x, start=0, end=1) for the size of the first axis"}.get(
                    str(name), "use ONNX ops on tensors (op.Max, op.Min, op.Abs, op.Cast, op.ReduceSum...)"),
            )
        try:
            result = target(*arguments, **keywords)
        except DslError as err:
            raise err.with_location(self.loc(node)) from None
        except Exception as err:
            raise DslTypeError(f"calling {name or target!r} failed: {type(err).__name__}: {err}", self.loc(node),
                               hint="Python functions only see tensors as opaque values while compiling") from None
        if isinstance(result, (list, dict)) and result is not owner:
            self.made_here(result)
        return self.operand(result)


def _bind(function: Any, signature: inspect.Signature, arguments: list[Any], keywords: dict[str, Any], name: str,
          location: Any) -> dict[str, Any]:
    """Parameter name -> argument of a helper call, defaults applied, as Python binds them
    (``inspect.Signature.bind`` where the fast path for plain parameters does not apply)."""
    code = function.__code__
    plain = not (code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)) and not code.co_kwonlyargcount
    names = code.co_varnames[: code.co_argcount]
    if plain and len(arguments) <= len(names) and not code.co_posonlyargcount:
        bound = dict(zip(names, arguments))
        defaults = function.__defaults__ or ()
        first_default = len(names) - len(defaults)
        if all(key in names and key not in bound for key in keywords):
            bound.update(keywords)
            for index in range(len(arguments), len(names)):
                if names[index] not in bound and index >= first_default:
                    bound[names[index]] = defaults[index - first_default]
            if len(bound) == len(names):
                return {parameter: bound[parameter] for parameter in names}
    try:
        found = signature.bind(*arguments, **keywords)
    except TypeError as err:
        raise DslTypeError(f"calling {name}: {err}", location, hint=f"its signature is {name}{signature}") from None
    found.apply_defaults()
    return dict(found.arguments)


# What to write instead of iterating over a tensor with something other than a for loop
# over it or enumerate (which compile: ControlFlowCompiler.rows_loop).
_LOOP_OVER_TENSOR_HINT = "loop over indices, for i in range(n), and read x[i]; or use op.SequenceMap / op.Scan"
# Builtins that iterate over an argument: over a tensor, its first axis's items.
_ITERATING = frozenset({builtins.enumerate, builtins.zip, builtins.reversed, builtins.iter, builtins.list,
                        builtins.tuple})
_VALUE_READING = frozenset({
    builtins.len, builtins.int, builtins.float, builtins.bool, builtins.abs, builtins.round, builtins.divmod,
    builtins.min, builtins.max, builtins.sorted, builtins.any, builtins.all, builtins.str, builtins.set,
    builtins.frozenset,
})


def _is_structural(target: Any, structural: frozenset[Any]) -> bool:
    import dataclasses
    import types as pytypes

    try:
        if target in structural:
            return True
    except TypeError:  # an unhashable callable
        return False
    if isinstance(target, type):
        return (target is pytypes.SimpleNamespace or dataclasses.is_dataclass(target)
                or (issubclass(target, tuple) and hasattr(target, "_fields")))
    return False
