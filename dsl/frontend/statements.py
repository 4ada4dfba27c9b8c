"""Statements: assignment (SSA), augmented assignment, ``del``, ``pass``, ``return``,
expression statements (``breakpoint()`` and ``print(...)`` are eager-only: nothing), nested ``@graph()`` definitions, and the constructs refused.

Every assignment binds the name to a new value; the value takes the variable's name
(``d``, ``d_1``, ...).  A block returns an exit marker when it ends in ``return``,
``break`` or ``continue`` (see :mod:`dsl.frontend.exits`).
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, Any

from dsl import ir
from dsl.dtypes import dtype_mismatch, element_type_of
from dsl.errors import DslError, DslSyntaxError, DslTypeError, UnsupportedSyntaxError
from dsl.frontend.bindings import GraphDef, PyValue, Undefined, ValueTuple
from dsl.frontend.exits import LOOP_EXIT, ReturnExit, contains_exit, with_continuation
from dsl.frontend.python_values import raw_of
from dsl.frontend.scripted import GraphDecorator
from dsl.frontend.tensor_properties import RankUnknownShape

if TYPE_CHECKING:  # the other mixins, as mypy sees them (see dsl.frontend.surface)
    from dsl.frontend.surface import CompilerSurface as _CompilerBase
else:
    _CompilerBase = object

__all__ = ["StatementCompiler", "UNSUPPORTED_STATEMENTS"]

UNSUPPORTED_STATEMENTS: dict[type, tuple[str, str]] = {
    ast.Try: ("try/except", "ONNX has no exceptions; check conditions with if and op.Where"),
    ast.With: ("with", "remove the with block; scripted code has no context managers"),
    ast.AsyncWith: ("async with", "remove it; scripted functions are not coroutines"),
    ast.AsyncFor: ("async for", "use a plain for loop over range(...)"),
    ast.AsyncFunctionDef: ("async def", "use a nested @graph() def or a separate @script function"),
    ast.ClassDef: ("class definition", "define classes outside the scripted function"),
    ast.Global: ("global", "read module-level constants directly; assignments stay local"),
    ast.Nonlocal: ("nonlocal", "return the value instead of assigning an outer variable"),
    ast.Raise: ("raise", "ONNX has no exceptions; validate inputs before calling the model"),
    ast.Import: ("import", "import at module level"),
    ast.ImportFrom: ("import", "import at module level"),
}
if hasattr(ast, "Match"):
    UNSUPPORTED_STATEMENTS[ast.Match] = ("match", "use if/elif/else")
if hasattr(ast, "TryStar"):
    UNSUPPORTED_STATEMENTS[ast.TryStar] = ("try/except*", "ONNX has no exceptions")


def _settable_dtype(value: Any) -> bool:
    """Whether an object computed while compiling (an eager tensor) declares ``.dtype`` as a
    tensor does; numpy's own ``a.dtype = ...`` reinterprets the bytes and stays refused."""
    found = getattr(type(value), "dtype", None)
    return isinstance(found, property) and found.fset is not None


class StatementCompiler(_CompilerBase):
    """Mixin of :class:`dsl.frontend.compiler.FunctionCompiler`: one ``visit_<Kind>`` method
    per statement kind (``if``/``for``/``while`` are in :mod:`dsl.frontend.control_flow`)."""

    def compile_block(self, statements: list[ast.stmt]) -> Any:
        """Compile statements in order; returns the exit marker of the block, or None."""
        count = len(statements)
        for index, statement in enumerate(statements):
            if isinstance(statement, ast.If) and index + 1 < count and contains_exit(statement):
                statement = with_continuation(statement, statements[index + 1 :])
                return self.statement(statement)
            outcome = self.statement(statement)
            if outcome is not None:
                return outcome  # statements after an exit are unreachable, as in Python
        return None

    def statement(self, node: ast.stmt) -> Any:
        self.current_statement = node
        visitor = self.visitors.get(type(node)) or self.find_visitor(node)
        if visitor is None:
            what, hint = UNSUPPORTED_STATEMENTS.get(type(node), (type(node).__name__, "rewrite it"))
            raise UnsupportedSyntaxError(f"{what} is not supported in @script", self.loc(node), hint=hint)
        return visitor(self, node)

    # ------------------------------------------------------------ assignment
    def visit_Assign(self, node: ast.Assign) -> None:
        value_node = node.value
        targets = node.targets
        if len(targets) == 1 and isinstance(targets[0], ast.Name):  # the usual ``name = ...``
            self.bind_name(targets[0].id, self.expr(value_node))
            return
        unpacked = targets[0] if len(targets) == 1 else None
        if isinstance(value_node, ast.Call) and isinstance(unpacked, (ast.Tuple, ast.List)):
            operand = self.visit_Call(value_node, len(unpacked.elts))
        else:
            operand = self.expr(value_node)
        for target in targets:
            self.assign(target, operand, value_node)

    def assign(self, target: ast.expr, operand: Any, value_node: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.bind_name(target.id, operand)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            items = self.unpack(operand, len(target.elts), target)
            for element, item in zip(target.elts, items):
                omitted = (isinstance(element, ast.Name) and element.id == "_" and isinstance(value_node, ast.Call)
                           and isinstance(item, ir.Value) and item in self.ctx.auto_named
                           and self.is_optional_output(item))
                self.assign(element, item, value_node)
                if omitted:  # ``a, _, c = op.X(...)``: ``_`` omits that optional output ("")
                    item.name = ""
            return
        if isinstance(target, ast.Subscript):
            raise UnsupportedSyntaxError(
                "assigning to x[...] is not supported (tensors are immutable in ONNX)",
                self.loc(target),
                hint="build a new tensor with op.ScatterND, op.ScatterElements or op.Where",
            )
        if isinstance(target, ast.Attribute) and target.attr == "dtype":
            self.declare_dtype(target, operand)
            return
        if isinstance(target, ast.Starred):
            raise UnsupportedSyntaxError("starred assignment is not supported", self.loc(target),
                                         hint="unpack into a fixed number of names")
        raise UnsupportedSyntaxError("only names can be assigned in @script", self.loc(target),
                                     hint="assign to a plain variable name")

    def declare_dtype(self, target: ast.Attribute, operand: Any) -> None:
        """``x.dtype = T``: declares the element type of ``x``, as eagerly (where it is
        always known, so only a check): the same type is nothing, another known type an
        error, and an unknown one (an untyped input's result) becomes ``T``."""
        tensor = self.expr(target.value)
        if isinstance(tensor, PyValue) and _settable_dtype(tensor.value):  # a tensor computed while compiling
            try:
                tensor.value.dtype = raw_of(operand)
            except DslError as err:
                raise err.with_location(self.loc(target)) from None
            return
        if not isinstance(tensor, ir.Value):
            raise UnsupportedSyntaxError("only a tensor's .dtype can be assigned in @script", self.loc(target),
                                         hint="assign to a plain variable name")
        if not isinstance(operand, PyValue):
            raise DslTypeError("the element type assigned to .dtype must be known while compiling", self.loc(target),
                               hint="assign FLOAT.dtype, another tensor's .dtype or a numpy dtype")
        try:
            wanted = element_type_of(operand.value)
        except DslError as err:
            raise err.with_location(self.loc(target)) from None
        known = self.ctx.elem(tensor)
        if known is None:
            self.ctx.elem_types[tensor] = wanted
        elif known != wanted:
            raise dtype_mismatch(known, wanted, self.loc(target), ast.unparse(target.value))

    def is_optional_output(self, value: ir.Value) -> bool:
        """Whether ``value`` is an optional output of its node's schema, which ``_`` may omit.

        A required or variadic output must keep a name (onnxruntime crashes on an empty
        one), so ``_`` only omits what the schema marks optional.
        """
        node = value.producer
        if node is None or node.callee is not None:
            return False
        version = self.ctx.opsets_used.get(node.domain, (None,))[0]
        if version is None:
            return False
        from dsl.opsets import get_opset

        opset = get_opset(node.domain, version)
        if not opset.has_schemas:
            return False
        schema = opset.get_op(node.op_type).schema
        index = node.outputs.index(value)
        if schema is None or index >= len(schema.outputs):
            return False
        import onnx.defs

        return schema.outputs[index].option == onnx.defs.OpSchema.FormalParameterOption.Optional

    def unpack(self, operand: Any, count: int, target: ast.expr) -> list[Any]:
        if isinstance(operand, ValueTuple):
            items = list(operand.items)
        elif isinstance(operand, PyValue) and isinstance(operand.value, (tuple, list)):
            items = [PyValue(v) for v in operand.value]
        elif isinstance(operand, PyValue) and isinstance(operand.value, RankUnknownShape):
            raise operand.value.unknown("unpacked").with_location(self.loc(target))
        else:
            raise DslTypeError(f"cannot unpack one value into {count} names", self.loc(target),
                               hint="only a multi-output call or a tuple can be unpacked")
        if len(items) != count:
            raise DslTypeError(f"{len(items)} values cannot be unpacked into {count} names", self.loc(target),
                               hint="bind exactly as many names as there are values")
        return items

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return None
        if not isinstance(node.target, ast.Name):
            raise UnsupportedSyntaxError("only names can be assigned in @script", self.loc(node.target))
        self.bind_name(node.target.id, self.expr(node.value))
        return None

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise UnsupportedSyntaxError(
                "augmented assignment to x[...] is not supported (tensors are immutable in ONNX)",
                self.loc(node.target),
                hint="write x = op.ScatterND(...) or compute a new tensor",
            )
        current = self.resolve_name(node.target.id, node.target)
        synthetic = ast.copy_location(ast.BinOp(left=node.target, op=node.op, right=node.value), node)
        synthetic.end_lineno, synthetic.end_col_offset = node.end_lineno, node.end_col_offset
        right = self.expr(node.value)
        name = type(node.op).__name__
        if isinstance(current, PyValue) and isinstance(right, PyValue):
            from dsl.frontend.expressions import _PYTHON_BINARY

            result: Any = self.fold(_PYTHON_BINARY[name], (current.value, right.value), node)
        else:
            result = self.expr_binop_operands(name, current, right, synthetic)
        self.bind_name(node.target.id, result)

    def expr_binop_operands(self, name: str, left: Any, right: Any, node: ast.BinOp) -> Any:
        from dsl.operators import BINARY

        if name not in BINARY:
            raise UnsupportedSyntaxError(f"the operator {type(node.op).__name__} is not supported on tensors",
                                         self.loc(node), hint="write the operation with an op call")
        return self.binary(name, left, right, node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if not isinstance(target, ast.Name):
                raise UnsupportedSyntaxError("only names can be deleted", self.loc(target))
            self.resolve_name(target.id, target)
            self.scope.bind(target.id, Undefined(f"{target.id!r} was deleted", "assign it again before use"))

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return None  # a string used as a comment
        if isinstance(node.value, ast.Call) and self.is_eager_only(node.value):
            return None
        self.expr(node.value)
        return None

    def is_eager_only(self, call: ast.Call) -> bool:
        """Whether ``call`` is a debugging call that only eager mode runs: ``breakpoint()``,
        ``pdb.set_trace()``, ``print(...)``.  Compiling reads the function, it does not run
        it, so these add nothing to the graph and their arguments are not compiled."""
        callee = self.expr(call.func)
        if not isinstance(callee, PyValue):
            return False
        target = callee.value
        if target is builtins.breakpoint or target is builtins.print:
            return True
        return getattr(target, "__module__", None) == "pdb" and getattr(target, "__name__", None) == "set_trace"

    # ------------------------------------------------------------------ exits
    def visit_Return(self, node: ast.Return) -> ReturnExit:
        if self.helper_depth > 0 and self.loop_depth == 0:
            return self.helper_return(node)
        if self.loop_depth > 0:
            raise UnsupportedSyntaxError(
                "return inside a loop is not supported",
                self.loc(node),
                hint="set a variable, break out of the loop, and return after it",
            )
        if node.value is None:
            raise DslSyntaxError("a scripted function must return a value", self.loc(node),
                                 hint="write 'return <tensor>'")
        location = self.loc(node)
        items = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        values: list[ir.Value] = []
        names: list[str] = []
        declared = self.declared_outputs
        for item in items:
            if len(items) == 1 and declared is not None and len(declared) > 1 and isinstance(item, ast.Call):
                operand = self.visit_Call(item, len(declared))  # ``return op.TopK(...)`` with two declared outputs
            else:
                operand = self.expr(item)
            parts = list(operand.items) if isinstance(operand, ValueTuple) else [operand]
            name = item.id if isinstance(item, ast.Name) else "return_val"
            for part in parts:
                index = len(values)
                want = declared[index] if declared is not None and index < len(declared) else None
                elem = want.elem_type if isinstance(want, ir.TensorType) else None
                values.append(self.as_value(part, item, elem=elem))  # ``return 0`` -> the declared type
                names.append(name)
        return ReturnExit(values, names, location)

    def visit_Break(self, node: ast.Break) -> Any:
        self.scope.bind("@continue", PyValue(False))
        return LOOP_EXIT

    def visit_Continue(self, node: ast.Continue) -> Any:
        return LOOP_EXIT

    # ------------------------------------------------------------ nested defs
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        decorators = node.decorator_list
        only = decorators[0] if len(decorators) == 1 else None
        is_graph = False
        if isinstance(only, ast.Call) and not only.args:
            decorator = self.expr(only.func)
            is_graph = isinstance(decorator, PyValue) and isinstance(decorator.value, GraphDecorator)
        if not is_graph:
            raise UnsupportedSyntaxError(
                f"nested function {node.name!r} is not supported unless decorated with @graph()",
                self.loc(node),
                hint="decorate it with @graph() to pass it as a subgraph, or make it a module-level @script function",
            )
        self.scope.bind(node.name, GraphDef(node, self.scope))
