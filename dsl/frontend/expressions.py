"""Expressions: names, literals, Python operators, subscripts, conditional expressions.

Every Python operator goes through :mod:`dsl.operators`, the table eager mode reads
too, so ``a % b`` or ``~m`` means the same in an exported model and while debugging.
Operations on two compile-time constants are evaluated by Python itself (as eager mode
would), so ``2 * n`` with a module-level ``n`` stays a constant.
"""

from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import indexing, ir
from dsl.annotation_checks import NOT_A_TENSOR_HINT
from dsl.errors import DslError, DslNameError, DslTypeError, UnsupportedSyntaxError
from dsl.frontend.bindings import AttrRef, GraphDef, PyValue, Undefined, ValueTuple
from dsl.frontend.constants import array_data, is_tensor_literal
from dsl.frontend.python_values import holds_tensor, raw_of
from dsl.frontend.static_shapes import SourceNames
from dsl.frontend.tensor_properties import SymbolicSize, has_symbolic_size, read_property
from dsl.frontend.value_kinds import value_kind
from dsl.list_packing import ListTensor, packed_element_type
from dsl.operators import BINARY, COMPARE, binary_spelling, unary_spelling, unsupported_operator
from dsl.opsets import Opset, to_tensor

if TYPE_CHECKING:  # the other mixins, as mypy sees them (see dsl.frontend.surface)
    from dsl.frontend.surface import CompilerSurface as _CompilerBase
else:
    _CompilerBase = object

__all__ = ["ExpressionCompiler", "UNSUPPORTED_EXPRESSIONS"]

_PYTHON_BINARY = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv,
    "FloorDiv": operator.floordiv, "Mod": operator.mod, "Pow": operator.pow, "MatMult": operator.matmul,
    "BitAnd": operator.and_, "BitOr": operator.or_, "BitXor": operator.xor,
    "LShift": operator.lshift, "RShift": operator.rshift,
}
_PYTHON_UNARY = {"USub": operator.neg, "UAdd": operator.pos, "Invert": operator.invert, "Not": operator.not_}
_PYTHON_COMPARE = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
    "Gt": operator.gt, "GtE": operator.ge,
}
_PYTHON_IDENTITY = {
    "Is": operator.is_, "IsNot": operator.is_not,
    "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
}
_FLOAT, _INT64 = 1, 7  # ONNX element type numbers
_TENSOR_ATTRIBUTE_HINTS = {
    "T": "use op.Transpose(x)",
    "size": "use op.Size(x)",
}
_TENSOR_PROPERTIES = frozenset({"shape", "ndim", "dtype"})

UNSUPPORTED_EXPRESSIONS: dict[type, tuple[str, str]] = {
    ast.Lambda: ("lambda", "define a @script function (or a nested @graph() function) instead"),
    ast.Await: ("await", "scripted functions are not coroutines; remove await"),
    ast.Yield: ("yield", "return the values instead; scripted functions are not generators"),
    ast.YieldFrom: ("yield from", "return the values instead; scripted functions are not generators"),
    ast.NamedExpr: ("assignment expression (:=)", "assign in a separate statement"),
    ast.Starred: ("starred expression", "pass each value explicitly"),
    ast.Slice: ("slice outside a subscript", "slices are only allowed inside x[...]"),
}


def _same_constant(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, np.ndarray):
        return left.dtype == right.dtype and left.shape == right.shape and bool(np.array_equal(left, right))
    try:
        return bool(left == right)
    except Exception:  # objects whose == is not a plain bool
        return False


class ExpressionCompiler(_CompilerBase):
    """Mixin of :class:`dsl.frontend.compiler.FunctionCompiler`: one ``visit_<Kind>`` method
    per expression kind (calls are in :mod:`dsl.frontend.calls`)."""

    def expr(self, node: ast.expr) -> Any:
        """Compile an expression to an operand (see :mod:`dsl.frontend.bindings`)."""
        visitor = self.visitors.get(type(node)) or self.find_visitor(node)
        if visitor is None:
            raise self.unsupported(node)
        return visitor(self, node)

    def unsupported(self, node: ast.AST) -> UnsupportedSyntaxError:
        what, hint = UNSUPPORTED_EXPRESSIONS.get(type(node), (type(node).__name__, "rewrite it with supported constructs"))
        return UnsupportedSyntaxError(f"{what} is not supported in @script", self.loc(node), hint=hint)

    # ------------------------------------------------------------- atoms
    def visit_Constant(self, node: ast.Constant) -> Any:
        return PyValue(node.value)

    def visit_Name(self, node: ast.Name) -> Any:
        found = self.scope.lookup(node.id)
        if found is None or isinstance(found, Undefined):  # outer names and mistakes: the full rules
            return self.resolve_name(node.id, node)
        return found

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if isinstance(base, PyValue):
            owner = base.value
            try:
                if isinstance(owner, Opset):
                    # ``op.X`` is always an operator, never a method or attribute of the Opset
                    # object: generated source spells a model's op_type here (``op.__init__``).
                    return PyValue(owner.get_op(node.attr))
                return self.operand(getattr(owner, node.attr))
            except DslError as err:
                raise err.with_location(self.loc(node)) from None
            except AttributeError:
                owner = getattr(base.value, "__name__", None) or type(base.value).__name__
                raise DslNameError(f"{owner} has no attribute {node.attr!r}", self.loc(node),
                                   hint="check the spelling") from None
            except Exception as err:
                raise DslTypeError(f"reading .{node.attr} failed: {type(err).__name__}: {err}",
                                   self.loc(node)) from None
        if isinstance(base, ir.Value):
            if node.attr in _TENSOR_PROPERTIES:
                return PyValue(read_property(base, node.attr, self.ctx.shapes.shape(base), self.ctx.elem(base),
                                             self.loc(node)))
            raise DslTypeError(
                f"tensors have no attribute {node.attr!r} in @script",
                self.loc(node),
                hint=_TENSOR_ATTRIBUTE_HINTS.get(node.attr, "use an op to compute it"),
            )
        if isinstance(base, ValueTuple):
            raise DslTypeError(f"several values have no attribute {node.attr!r}", self.loc(node),
                               hint="unpack them first: a, b = ...")
        raise DslTypeError(f"cannot read attribute {node.attr!r} of this value", self.loc(node),
                           hint="only modules and opsets have attributes in @script")

    def visit_Tuple(self, node: ast.Tuple) -> Any:
        return self.tuple_or_list(node)

    def visit_List(self, node: ast.List) -> Any:
        return self.tuple_or_list(node)

    def tuple_or_list(self, node: ast.Tuple | ast.List) -> Any:
        """A tuple or list display: a Python constant, or a ValueTuple of tensors (tuples only)."""
        items: list[Any] = []
        for item in node.elts:
            if isinstance(item, ast.Starred):  # [*parts, x]: parts known while compiling
                items.extend(self.operand(v) for v in self.static_items(self.expr(item.value), item, "*"))
            else:
                items.append(self.expr(item))
        if all(isinstance(item, PyValue) for item in items):
            values = [item.value for item in items]
            return PyValue(tuple(values) if isinstance(node, ast.Tuple) else self.made_here(values))
        if isinstance(node, ast.Tuple):
            return ValueTuple(tuple(items))
        # A list with an attribute parameter is a tensor at once (an attribute has no Python
        # value to keep); numbers and tensors stay a Python list, as eagerly (len, indexing,
        # loops), packed into one tensor where one is wanted (:meth:`container_as_value`).
        if any(isinstance(item, AttrRef) for item in items):
            if not any(isinstance(item, ast.Starred) for item in node.elts):
                items = [self.as_value(item, node) if isinstance(item, PyValue) and isinstance(item.value, SymbolicSize)
                         else item for item in items]
                return self.list_tensor(items, node)
        return PyValue(self.made_here([raw_of(item) for item in items]))

    def list_tensor(self, items: list[Any], node: ast.List, texts: list[str] | None = None) -> ir.Value:
        """A list of numbers, attribute parameters, symbolic sizes and integer tensors of
        rank 0 or 1 (``[0, 0, heads, -1]``, ``[b, s, n, -1]``, Tile's ``[a, b]``) -> one 1-D
        tensor: each run of numbers one constant, every other item reshaped to ``[-1]``,
        all concatenated (:mod:`dsl.list_packing`, which eager mode follows too).
        ``texts`` name the items in messages (default: their source)."""
        if not all(isinstance(item, (PyValue, AttrRef, ir.Value)) for item in items):
            raise DslTypeError(
                "a list of tensors is not a tensor",
                self.loc(node),
                hint=NOT_A_TENSOR_HINT,
            )
        if any(isinstance(item, ir.Value) for item in items):
            names = texts if texts is not None else [ast.unparse(item) for item in node.elts]
            described = [_list_item(item, name, self.ctx) for item, name in zip(items, names)]
            elem = packed_element_type(described, self.loc(node)) or _INT64
        else:
            elem = self.list_elem(items, node)
        location = self.loc(node)
        flat = self.as_value(PyValue(np.array([-1], dtype=np.int64)), node)
        parts: list[ir.Value | None] = []
        numbers: list[Any] = []
        for item, item_node in zip([*items, None], [*node.elts, None]):
            if isinstance(item, PyValue):
                numbers.append(item.value)
                continue
            if numbers:
                parts.append(self.as_value(PyValue(numbers), node, elem=elem))
                numbers = []
            if item is not None:
                parts.append(self.builder.operator("Reshape", [self.as_value(item, item_node, elem=elem), flat], location))
        return self.builder.operator("Concat", parts, location, axis=0)

    def list_elem(self, items: list[Any], node: ast.List) -> int:
        """The element type of a list made a tensor: a tensor item's, else INT64 for ints
        and FLOAT where a float (a number or a float attribute) is among them."""
        for item in items:
            if isinstance(item, ir.Value):
                known = self.ctx.elem(item)
                if known is not None:
                    return known
        for item in items:
            if isinstance(item, PyValue) and not isinstance(item.value, (int, float, np.integer, np.floating)):
                raise DslTypeError(
                    f"a list made a tensor holds numbers, not {type(item.value).__name__}",
                    self.loc(node), hint="write the list of numbers, attributes and one-element tensors only",
                )
        floats = any(
            (isinstance(item, PyValue) and isinstance(item.value, (float, np.floating)))
            or (isinstance(item, AttrRef) and item.param.kind in (ir.AttrKind.FLOAT, ir.AttrKind.FLOATS))
            for item in items
        )
        return _FLOAT if floats else _INT64

    # ---------------------------------------------------------- operators
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        name = type(node.op).__name__
        left = self.expr(node.left)
        right = self.expr(node.right)
        if isinstance(left, PyValue) and isinstance(right, PyValue):
            if not (has_symbolic_size(left.value) or has_symbolic_size(right.value)):
                return self.fold(_PYTHON_BINARY[name], (left.value, right.value), node)
            if name == "FloorDiv" and _size_or_natural(left.value) and _size_or_natural(right.value):
                name = "Div"  # sizes are never negative: integer Div (truncating) is floor division
            left, right = self.size_operands(left, right, node)
        if name not in BINARY:
            message, hint = unsupported_operator(name)
            raise UnsupportedSyntaxError(message, self.loc(node), hint=hint)
        return self.binary(name, left, right, node)

    def size_operands(self, left: PyValue, right: PyValue, node: ast.BinOp) -> tuple[ir.Value, ir.Value]:
        """Two Python operands, one a symbolic size, as tensors: INT64, or FLOAT beside a float
        (``s * 0.5`` is a float eagerly)."""
        floats = isinstance(left.value, (float, np.floating)) or isinstance(right.value, (float, np.floating))
        elem = _FLOAT if floats else _INT64
        return self.as_value(left, node.left, elem=elem), self.as_value(right, node.right, elem=elem)

    def binary(self, name: str, left: Any, right: Any, node: ast.AST) -> ir.Value:
        """``left <op> right`` as ONNX nodes, spelled by :func:`dsl.operators.binary_spelling`."""
        left_value, right_value = self.operand_pair(left, right, node)
        known = self.ctx.elem_types
        elem = known.get(left_value) or known.get(right_value) or self.ctx.elem(left_value) or self.ctx.elem(right_value)
        spelling = binary_spelling(name, elem)
        names = SourceNames((node.left, node.right)) if isinstance(node, ast.BinOp) else None
        return self.apply_spelling(spelling, [left_value, right_value], node, names)

    def operand_pair(self, left: Any, right: Any, node: ast.AST) -> tuple[ir.Value, ir.Value]:
        if isinstance(left, ir.Value):
            if isinstance(right, ir.Value):
                return left, right
            return left, self.as_value(right, node, beside=left)
        if isinstance(right, ir.Value):
            return self.as_value(left, node, beside=right), right
        left_value = self.as_value(left, node)
        return left_value, self.as_value(right, node, beside=left_value)

    def apply_spelling(self, spelling: Any, inputs: list[ir.Value | None], node: ast.AST,
                       names: SourceNames | None = None) -> ir.Value:
        location = self.loc(node)
        if spelling.attributes:
            result = self.builder.operator(spelling.op_type, inputs, location, names, **dict(spelling.attributes))
        else:
            result = self.builder.operator(spelling.op_type, inputs, location, names)
        if spelling.negate:
            result = self.builder.operator("Not", [result], location)
        return result

    def fold(self, function: Any, arguments: tuple[Any, ...], node: ast.AST) -> PyValue:
        try:
            return PyValue(function(*arguments))
        except Exception as err:
            raise DslTypeError(
                f"evaluating this constant expression failed: {type(err).__name__}: {err}",
                self.loc(node),
                hint="compile-time constants follow Python's rules",
            ) from None

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        name = type(node.op).__name__
        operand = self.expr(node.operand)
        if isinstance(operand, PyValue) and not isinstance(operand.value, SymbolicSize):
            return self.fold(_PYTHON_UNARY[name], (operand.value,), node)
        value = self.as_value(operand, node)
        if name == "Not":
            value = self.condition_value(value, node)
        spelling = unary_spelling(name, self.ctx.elem(value))
        return self.apply_spelling(spelling, [value], node)

    def visit_Compare(self, node: ast.Compare) -> Any:
        operands = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        results: list[Any] = []
        for index, comparison in enumerate(node.ops):
            name = type(comparison).__name__
            left, right = operands[index], operands[index + 1]
            if name in _PYTHON_IDENTITY:
                results.append(self.identity_compare(name, left, right, node))
                continue
            if name not in COMPARE:
                raise UnsupportedSyntaxError(
                    f"the comparison {type(comparison).__name__} is not supported",
                    self.loc(node),
                    hint="'is'/'in' have no tensor meaning; compare values with == and combine with |",
                )
            if isinstance(left, PyValue) and isinstance(right, PyValue) and not (
                    isinstance(left.value, SymbolicSize) or isinstance(right.value, SymbolicSize)):
                results.append(self.fold(_PYTHON_COMPARE[name], (left.value, right.value), node))
                continue
            left_value, right_value = self.operand_pair(left, right, node)
            results.append(self.apply_spelling(COMPARE[name], [left_value, right_value], node))
        return self.conjunction(results, node, "And")

    def identity_compare(self, name: str, left: Any, right: Any, node: ast.AST) -> PyValue:
        """``is``/``is not``/``in``/``not in``: decided while compiling (``bias is None``)."""
        left_raw, right_raw = raw_of(left), raw_of(right)
        if name in ("In", "NotIn") and isinstance(left_raw, ir.Value):
            raise DslTypeError("'in' with a tensor on its left needs its values at run time", self.loc(node),
                               hint="compare tensors with op.Equal and combine with op.Or")
        if isinstance(left_raw, AttrRef) or isinstance(right_raw, AttrRef):
            raise DslTypeError("an attribute parameter's value is only known where the function is called",
                               self.loc(node), hint="give the attribute a default and branch with if on it")
        if name in ("In", "NotIn") and not isinstance(right, PyValue):
            raise DslTypeError("'in' a tensor needs its values at run time", self.loc(node),
                               hint="compare with op.Equal and reduce with op.ReduceMax")
        return self.fold(_PYTHON_IDENTITY[name], (left_raw, right_raw), node)

    def conjunction(self, results: list[Any], node: ast.AST, op_type: str) -> Any:
        """Combine boolean operands with And/Or; constants decide at compile time where they can."""
        absorbing = op_type == "Or"  # True absorbs Or, False absorbs And
        tensors: list[ir.Value] = []
        for result in results:
            if isinstance(result, PyValue):
                truth = self.truth(result, node)
                if truth == absorbing:
                    return PyValue(absorbing)
                continue
            tensors.append(self.condition_value(result, node))
        if not tensors:
            return PyValue(not absorbing)
        combined = tensors[0]
        for other in tensors[1:]:
            combined = self.builder.operator(op_type, [combined, other], self.loc(node))
        return combined

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        op_type = "And" if isinstance(node.op, ast.And) else "Or"
        values: list[Any] = []
        last = len(node.values) - 1
        for index, value_node in enumerate(node.values):
            operand = self.expr(value_node)
            if not values and isinstance(operand, PyValue) and index < last:
                # Python's short circuit on a value known while compiling: what follows
                # ``bias is not None and`` is not compiled when bias is None.
                if self.truth(operand, value_node) == (op_type == "Or"):
                    return operand
                continue
            if not values and index == last:
                return operand  # ``True and x`` is x, as in Python
            values.append(operand)
        if all(isinstance(v, PyValue) for v in values):
            result = values[0].value
            for v in values[1:]:
                result = (result and v.value) if op_type == "And" else (result or v.value)
            return PyValue(result)
        return self.conjunction(values, node, op_type)

    def truth(self, operand: PyValue, node: ast.AST) -> bool:
        try:
            return bool(operand.value)
        except Exception as err:
            raise DslTypeError(f"the truth value of {operand.value!r} is ambiguous: {err}", self.loc(node),
                               hint="use a scalar condition") from None

    def condition_value(self, operand: Any, node: ast.AST) -> ir.Value:
        """A BOOL tensor for a condition (``if``, ``while``, ``and``, ``not``)."""
        if isinstance(operand, PyValue):
            return self.as_value(PyValue(self.truth(operand, node)), node)
        value = self.as_value(operand, node)
        if self.ctx.elem(value) != 9:  # BOOL
            value = self.builder.operator("Cast", [value], self.loc(node), to=9)
        return value

    # ---------------------------------------------------------- subscripts
    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        location = self.loc(node)
        if isinstance(base, PyValue) and not isinstance(base.value, (list, tuple, np.ndarray)):
            # A compile-time object (FLOAT, Sequence, a dict of settings) is indexed by
            # Python itself: Sequence[FLOAT[5]] is a type, not tensor indexing.
            index = self.compile_time_index(node.slice)
            if index is None:
                raise DslTypeError(
                    f"a {type(base.value).__name__} known at compile time can only be indexed by "
                    "values known at compile time",
                    location,
                    hint="index tensors (function inputs, op results) instead, or use op.Gather",
                )
            return self.operand(self.fold(operator.getitem, (base.value, index.value), node).value)
        index = self.index_item(node.slice)
        if isinstance(base, ValueTuple):
            if isinstance(index, int) and not isinstance(index, bool):
                try:
                    return base.items[index]
                except IndexError:
                    raise DslTypeError(f"index {index} is out of range for {len(base.items)} values",
                                       location) from None
            if isinstance(index, slice) and not _has_tensor(index):
                return ValueTuple(base.items[index])
            raise DslTypeError("several values can only be indexed with a constant int", location,
                               hint="unpack them: a, b = ...")
        if isinstance(base, PyValue) and not _has_tensor(index):
            return self.operand(self.fold(operator.getitem, (base.value, index), node).value)
        if isinstance(base, PyValue) and holds_tensor(base.value):
            raise DslTypeError(
                "a Python list of tensors or weights cannot be indexed by a tensor", location,
                hint="index it with a Python int (a loop over a list, or range(n) with a constant n, is "
                "unrolled), or stack the tensors with op.Concat and select with op.Gather",
            )
        if isinstance(base, (GraphDef, ValueTuple)):
            raise DslTypeError("this value cannot be indexed", location)
        target = self.as_value(base, node)
        if value_kind(target, self.ctx) == "sequence":
            return self.sequence_item(target, index, node)

        def emit(op_type: str, inputs: list[Any], attributes: dict[str, Any]) -> list[Any]:
            if op_type == "Constant":
                return [self.builder.constant(to_tensor(attributes["value"]), location)]
            if op_type == "Cast" and self.ctx.elem(inputs[0]) == attributes.get("to"):
                return [inputs[0]]
            return [self.builder.operator(op_type, inputs, location, **attributes)]

        try:
            return indexing.lower_subscript(target, index, emit)
        except DslError as err:
            raise err.with_location(location) from None

    def sequence_item(self, sequence: ir.Value, index: Any, node: ast.Subscript) -> ir.Value:
        """``seq[i]`` on an ONNX sequence is SequenceAt (negative positions count from the end)."""
        if isinstance(index, (slice, tuple)) or index is None or index is Ellipsis:
            raise DslTypeError("a sequence can only be indexed by one position", self.loc(node),
                               hint="write seq[i]; use op.SequenceErase/op.SplitToSequence to build other sequences")
        position = index if isinstance(index, ir.Value) else self.as_value(PyValue(int(index)), node)
        return self.builder.operator("SequenceAt", [sequence, position], self.loc(node))

    def compile_time_index(self, node: ast.expr) -> PyValue | None:
        """The index as a Python value when every part of it is known at compile time."""
        if isinstance(node, ast.Tuple):
            items = [self.compile_time_index(item) for item in node.elts]
            if any(item is None for item in items):
                return None
            return PyValue(tuple(item.value for item in items if item is not None))
        if isinstance(node, ast.Slice):
            return None
        operand = self.expr(node)
        return operand if isinstance(operand, PyValue) else None

    def index_item(self, node: ast.expr) -> Any:
        """An index as Python would pass it to ``__getitem__``, with tensors as ir.Values."""
        if isinstance(node, ast.Slice):
            parts = [None if part is None else self.index_item(part) for part in (node.lower, node.upper, node.step)]
            return slice(*parts)
        if isinstance(node, ast.Tuple):
            return tuple(self.index_item(item) for item in node.elts)
        operand = self.expr(node)
        if isinstance(operand, PyValue):
            value = array_data(operand.value)
            if value is None or value is Ellipsis or isinstance(value, (int, np.integer, slice, tuple)):
                return value
            if is_tensor_literal(value):
                return value if isinstance(value, (list, np.ndarray)) else self.as_value(operand, node)
            raise DslTypeError(f"a {type(value).__name__} cannot be used as an index", self.loc(node),
                               hint="indices are ints, slices, None, ... or integer tensors")
        if isinstance(operand, AttrRef):
            return self.as_value(operand, node)
        if isinstance(operand, ir.Value):
            return operand
        raise DslTypeError("this value cannot be used as an index", self.loc(node))

    # ------------------------------------------------- conditional expression
    def visit_IfExp(self, node: ast.IfExp) -> Any:
        condition = self.expr(node.test)
        if isinstance(condition, PyValue):
            return self.expr(node.body if self.truth(condition, node.test) else node.orelse)
        return self.if_expression(node, self.condition_value(condition, node.test))


def _size_or_natural(value: Any) -> bool:
    """A symbolic size or a non-negative int: floor division of two is integer Div."""
    if isinstance(value, SymbolicSize):
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value >= 0)


def _has_tensor(index: Any) -> bool:
    if isinstance(index, tuple):
        return any(_has_tensor(item) for item in index)
    if isinstance(index, slice):
        return any(isinstance(part, ir.Value) for part in (index.start, index.stop, index.step))
    return isinstance(index, ir.Value)


def _list_item(item: Any, text: str, ctx: Any) -> Any:
    """A list item as :func:`dsl.list_packing.packed_element_type` reads it."""
    if isinstance(item, ir.Value):
        return ListTensor(text, ctx.elem(item), ctx.shapes.shape(item))
    if isinstance(item, AttrRef):
        return 0.0 if item.param.kind in (ir.AttrKind.FLOAT, ir.AttrKind.FLOATS) else 0
    return item.value
