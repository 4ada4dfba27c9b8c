"""``if``/``elif``/``else`` -> If, ``for i in range(...)`` and ``while`` -> Loop.

A branch or loop body is compiled into its own graph with its own scope; afterwards
the names it assigned decide the node's outputs (If) or loop-carried values (Loop).
``break`` and ``continue`` work through a hidden loop-carried flag, ``@continue``:
``break`` sets it to False, and the body's condition output is that flag (and, for
``while``, the loop test evaluated at the end of the body).  Common forms give the Loop
one would write by hand (:mod:`dsl.loop_forms` lists them), which the Python back end relies
on to write loops back as Python: ``range(n)`` is the trip count ``n`` itself, a final ``if b: break`` is
``Not(b)``, a leading ``if not c: break`` is the condition input ``c``, and ``while c:``
carries no copy of ``c`` that nothing reads (the Loop outputs that carry it are listed in
``while_conditions``, for the pass :mod:`dsl.passes.prune_loop_carried`).  An ``if`` on
a compile-time constant compiles only the branch taken; an ``if`` on an attribute
parameter becomes a real If on ``Constant(value_int=@flag)``, so the function keeps
working for every value of the attribute.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir, types
from dsl.errors import DslError, DslSyntaxError, DslTypeError, UnsupportedSyntaxError
from dsl.frontend.bindings import GraphDef, PyValue, Undefined, ValueTuple
from dsl.frontend.builder import GraphBuilder
from dsl.frontend.exits import LOOP_EXIT, ReturnExit
from dsl.frontend.expressions import _same_constant
from dsl.frontend.value_kinds import value_kind
from dsl.loop_forms import CONDITION_TYPE, ITERATION_TYPE, carried_type, empty_shape, known_scalar
from dsl.opsets import Op
from dsl.shape_rules import Shape

if TYPE_CHECKING:  # the other mixins, as mypy sees them (see dsl.frontend.surface)
    from dsl.frontend.surface import CompilerSurface as _CompilerBase
else:
    _CompilerBase = object

__all__ = ["ControlFlowCompiler", "assigned_names"]

CONTINUE_FLAG = "@continue"
_INT64 = types.INT64.enum


@dataclass(slots=True)
class Branch:
    """One compiled branch (or loop body): its graph builder, scope and how it ended."""

    builder: GraphBuilder
    scope: Any
    outcome: Any


def assigned_names(statements: list[ast.stmt]) -> list[str]:
    """Names a block assigns, in first-assignment order (nested defs are not entered)."""
    found: dict[str, None] = {}
    stack: list[ast.AST] = list(reversed(statements))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.setdefault(node.id, None)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return list(found)


class ControlFlowCompiler(_CompilerBase):
    """Mixin of :class:`dsl.frontend.compiler.FunctionCompiler` for If and Loop."""

    # ------------------------------------------------------------ branches
    def compile_branch(self, statements: list[ast.stmt], name: str) -> Branch:
        builder = GraphBuilder(self.ctx, name, parent=self.builder)
        scope = self.scope.child()
        saved = self.enter(builder, scope)
        try:
            outcome = self.compile_block(statements)
        finally:
            self.leave(saved)
        return Branch(builder, scope, outcome)

    def enter(self, builder: GraphBuilder, scope: Any) -> tuple[Any, Any]:
        """Compile into ``builder`` with ``scope``: a branch or body decided at run time."""
        saved = (self.builder, self.scope)
        self.builder, self.scope = builder, scope
        self.dynamic_depth += 1
        return saved

    def leave(self, saved: tuple[Any, Any]) -> None:
        self.builder, self.scope = saved
        self.dynamic_depth -= 1

    def visit_If(self, node: ast.If) -> Any:
        condition = self.expr(node.test)
        if isinstance(condition, PyValue):
            taken = node.body if self.truth(condition, node.test) else node.orelse
            return self.compile_block(taken)
        condition_value = self.condition_value(condition, node.test)
        then = self.compile_branch(node.body, "then_branch")
        orelse = self.compile_branch(node.orelse, "else_branch")
        if isinstance(then.outcome, ReturnExit) or isinstance(orelse.outcome, ReturnExit):
            return self.merge_returns(node, condition_value, then, orelse)
        return self.merge_assignments(node, condition_value, then, orelse)

    def merge_returns(self, node: ast.If, condition: ir.Value, then: Branch, orelse: Branch) -> ReturnExit:
        location = self.loc(node)
        if not (isinstance(then.outcome, ReturnExit) and isinstance(orelse.outcome, ReturnExit)):
            missing = "else" if isinstance(then.outcome, ReturnExit) else "if"
            raise DslSyntaxError(
                f"the {missing} branch of this if does not return, but the other one does",
                location,
                hint="return on every path: add a return after the if or in both branches",
            )
        then_values, else_values = then.outcome.values, orelse.outcome.values
        if len(then_values) != len(else_values):
            raise DslTypeError(
                f"the branches of this if return {len(then_values)} and {len(else_values)} values",
                location,
                hint="return the same number of values on every path",
            )
        outputs = self.emit_if(node, condition, then, orelse, list(then_values), list(else_values))
        names = [a if a == b else "return_val" for a, b in zip(then.outcome.names, orelse.outcome.names)]
        return ReturnExit(outputs, names, location, then.outcome.packed)

    def merge_assignments(self, node: ast.If, condition: ir.Value, then: Branch, orelse: Branch) -> Any:
        both_jump = then.outcome is LOOP_EXIT and orelse.outcome is LOOP_EXIT
        names = list(then.scope.names) + [n for n in orelse.scope.names if n not in then.scope.names]
        merged: list[tuple[str, Any, Any]] = []
        for name in names:
            before = self.scope.lookup(name)
            then_operand = then.scope.names.get(name, before)
            else_operand = orelse.scope.names.get(name, before)
            if then_operand is else_operand:
                # Both branches left it alone, or both bound the same outer value (b = c
                # in each): then that value is what the name holds after the if.
                if then_operand is not before:
                    self.scope.bind(name, then_operand)
                continue
            if _not_a_value(then_operand) or _not_a_value(else_operand):
                self.scope.bind(name, Undefined(
                    f"{name!r} is not assigned on every path through the if at line {self.loc(node).line}",
                    "assign it before the if, or in both branches",
                ))
                continue
            if isinstance(then_operand, PyValue) and isinstance(else_operand, PyValue):
                if _same_constant(then_operand.value, else_operand.value):
                    self.scope.bind(name, then_operand)
                    continue
                if name == CONTINUE_FLAG:
                    self.scope.bind(name, self.break_flag(condition, bool(then_operand.value), node))
                    continue
            merged.append((name, then_operand, else_operand))
        if merged:
            outputs = self.emit_if(node, condition, then, orelse, [m[1] for m in merged], [m[2] for m in merged],
                                   [m[0] for m in merged])
            for (name, _, _), output in zip(merged, outputs):
                self.bind_name(name, output)
        return LOOP_EXIT if both_jump else None

    def break_flag(self, condition: ir.Value, then_keeps_going: bool, node: ast.If) -> ir.Value:
        """``if c: break`` keeps the loop going while ``not c``: a Not, not an If of constants."""
        location = self.loc(node)
        flag = condition if then_keeps_going else self.builder.operator("Not", [condition], location)
        return self.scalar_condition(flag, node)

    def branch_outputs(self, branch: Branch, own: list[Any], others: list[Any], node: ast.AST) -> list[ir.Value]:
        saved = self.enter(branch.builder, branch.scope)
        try:
            taken: set[ir.Value] = set()
            location = self.loc(node)
            values = []
            for mine, other in zip(own, others):
                elem = self.ctx.elem(other) if isinstance(other, ir.Value) else None
                value = self.as_value(mine, node, elem=elem)
                values.append(self.output_value(value, taken, location))
            return values
        finally:
            self.leave(saved)

    def emit_if(
        self, node: ast.AST, condition: ir.Value, then: Branch, orelse: Branch, then_own: list[Any],
        else_own: list[Any], names: list[str] | None = None,
    ) -> list[ir.Value]:
        then_values = self.branch_outputs(then, then_own, else_own, node)
        else_values = self.branch_outputs(orelse, else_own, then_values, node)
        then.builder.graph.outputs = then_values
        orelse.builder.graph.outputs = else_values
        location = self.loc(node)
        then.builder.graph.location = orelse.builder.graph.location = location
        attributes = {
            "then_branch": ir.Attr("then_branch", ir.AttrKind.GRAPH, then.builder.graph, location=location),
            "else_branch": ir.Attr("else_branch", ir.AttrKind.GRAPH, orelse.builder.graph, location=location),
        }
        if_op = self.ctx.operator("If")
        for index, operands in enumerate(zip(then_own, else_own)):
            for operand in operands:
                if isinstance(operand, ir.Value):
                    self.check_carried_kind(if_op, names[index] if names else None, operand, location)
        outputs = self.builder.call_op(if_op, [condition], attributes, location, len(then_values))
        for output, then_value, else_value in zip(outputs, then_values, else_values):
            self.ctx.origins[output] = (then_value, else_value)
            elem = self.ctx.elem(then_value)
            if elem is not None and elem == self.ctx.elem(else_value):
                self.ctx.elem_types[output] = elem
            else:
                self.ctx.elem_types.pop(output, None)
            self.ctx.shapes.set_joined(output, then_value, else_value)
        return outputs

    def if_expression(self, node: ast.IfExp, condition: ir.Value) -> ir.Value:
        branches = []
        for expression, name in ((node.body, "then_branch"), (node.orelse, "else_branch")):
            builder = GraphBuilder(self.ctx, name, parent=self.builder)
            scope = self.scope.child()
            saved = self.enter(builder, scope)
            try:
                operand = self.expr(expression)
            finally:
                self.leave(saved)
            branches.append(Branch(builder, scope, operand))
        then, orelse = branches
        return self.emit_if(node, condition, then, orelse, [then.outcome], [orelse.outcome])[0]

    # --------------------------------------------------------------- loops
    def visit_For(self, node: ast.For) -> Any:
        iterator = node.iter
        is_range = False
        if isinstance(iterator, ast.Call) and not iterator.keywords and 1 <= len(iterator.args) <= 3:
            function = self.expr(iterator.func)
            is_range = isinstance(function, PyValue) and function.value is range
        if not is_range or not isinstance(iterator, ast.Call):  # the second test only informs mypy
            rows = self.rows_loop(node)
            if rows is not None:
                return self.visit_For(rows)
            iterable = self.expr(iterator)  # a Python list, tuple, dict, enumerate(...): unrolled
            return self.unroll_for(node, self.static_items(iterable, iterator, "a for loop"))
        arguments = [self.expr(a) for a in iterator.args]
        if all(isinstance(a, PyValue) for a in arguments):
            return self.static_range_loop(node, arguments, iterator)
        return self.range_loop(node, arguments, iterator)

    def rows_loop(self, node: ast.For) -> ast.For | None:
        """``for v in x`` and ``for i, v in enumerate(x)`` over a tensor ``x``, as eager mode
        runs them (a row of ``x`` an iteration), spelled as the loop over its first axis that
        compiles: ``for i in range(x.shape[0]): v = x[i]``; over a sequence, its items
        (``range(op.SequenceLength(x))``, ``x[i]`` a SequenceAt).  None for any other loop."""
        iterator, target = node.iter, node.target
        counted = None
        if isinstance(iterator, ast.Call) and not iterator.keywords and len(iterator.args) == 1 \
                and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            function = self.expr(iterator.func)
            if isinstance(function, PyValue) and function.value is enumerate:
                counted, iterator, target = target.elts[0], iterator.args[0], target.elts[1]
        if node.orelse or isinstance(iterator, ast.Starred) or not isinstance(counted, (ast.Name, type(None))):
            return None  # (an else, or a count bound to a pattern: iterated as Python)
        if counted is None and isinstance(iterator, ast.Call):
            return None  # (range, zip, a function's result: iterated as Python)
        rows = self.expr(iterator)
        kind = value_kind(rows, self.ctx) if isinstance(rows, ir.Value) else None
        if kind not in ("tensor", "sequence"):
            return None  # (not a value, or an optional or a value of a kind not known: refused as Python)
        held = self.new_synthetic(rows, iterator)
        index = counted.id if counted is not None else f"@row{len(self.synthetic)}"

        def at(made: ast.AST) -> Any:
            return ast.copy_location(made, iterator)

        size: Any
        if kind == "sequence":  # (its items a SequenceAt each, x[i] as compiled)
            size = self.new_synthetic(self.builder.operator("SequenceLength", [rows], self.loc(iterator)), iterator)
        else:
            size = at(ast.Subscript(value=at(ast.Attribute(value=held, attr="shape", ctx=ast.Load())),
                                    slice=at(ast.Constant(0)), ctx=ast.Load()))
            known = self.expr(size)
            if not (isinstance(known, PyValue) and _is_int(known.value)):  # (a symbolic size: an INT64 scalar)
                size = self.new_synthetic(self.as_value(known, size, elem=_INT64), iterator)
        row = at(ast.Assign(targets=[target], value=at(ast.Subscript(
            value=held, slice=at(ast.Name(id=index, ctx=ast.Load())), ctx=ast.Load()))))
        loop = ast.For(target=at(ast.Name(id=index, ctx=ast.Store())),
                       iter=at(ast.Call(func=at(ast.Name(id="range", ctx=ast.Load())), args=[size], keywords=[])),
                       body=[row, *node.body], orelse=[])
        return ast.copy_location(loop, node)

    def static_range_loop(self, node: ast.For, arguments: list[Any], iterator: ast.Call) -> Any:
        """``for i in range(<constants>)``: an ONNX Loop where the body compiles as one; unrolled
        (the body compiled per ``i``) where it needs ``i`` as a Python int (``layers[i]``),
        changes a Python container, or the loop has an else."""
        for operand, argument in zip(arguments, iterator.args):
            if not _is_int(operand.value):
                raise DslTypeError(f"range() takes ints, not {operand.value!r}", self.loc(argument),
                                   hint="use int constants or INT64 scalar tensors as bounds")
        try:
            items = range(*[a.value for a in arguments])
        except (TypeError, ValueError) as err:
            raise DslTypeError(f"range() failed: {err}", self.loc(iterator),
                               hint="use int constants or INT64 scalar tensors as bounds") from None
        if node.orelse or not isinstance(node.target, ast.Name):
            return self.unroll_for(node, self.static_items(PyValue(items), iterator, "a for loop"))
        builder = self.builder
        node_count, produced, constants = len(builder.graph.nodes), set(builder.produced), builder.snapshot()
        scope_names, conditions = dict(self.scope.names), len(self.while_conditions)
        try:
            return self.range_loop(node, arguments, iterator)
        except DslError:
            del self.while_conditions[conditions:]
            del builder.graph.nodes[node_count:]
            builder.produced.intersection_update(produced)
            builder.restore(constants)
            self.scope.names.clear()
            self.scope.names.update(scope_names)
        return self.unroll_for(node, self.static_items(PyValue(items), iterator, "a for loop"))

    def range_loop(self, node: ast.For, arguments: list[Any], iterator: ast.Call) -> None:
        """``for i in range(...)`` as an ONNX Loop."""
        if not isinstance(node.target, ast.Name):
            raise UnsupportedSyntaxError("the loop variable of a loop over tensor bounds must be a single name",
                                         self.loc(node.target), hint="write: for i in range(n)")
        if node.orelse:
            raise UnsupportedSyntaxError("for/else over tensor bounds is not supported", self.loc(node.orelse[0]),
                                         hint="use a flag variable set before break")
        for operand, argument in zip(arguments, iterator.args):
            if isinstance(operand, PyValue) and not _is_int(operand.value):
                raise DslTypeError(f"range() takes ints, not {operand.value!r}", self.loc(argument),
                                   hint="use int constants or INT64 scalar tensors as bounds")
        if len(arguments) == 1:
            arguments = [PyValue(0), arguments[0], PyValue(1)]
        elif len(arguments) == 2:
            arguments.append(PyValue(1))
        start, stop, step = arguments
        if isinstance(step, PyValue) and step.value == 0:
            raise DslTypeError("range() step must not be zero", self.loc(iterator))
        if all(isinstance(a, PyValue) for a in arguments):
            trip: Any = PyValue(len(range(int(start.value), int(stop.value), int(step.value))))
        else:
            trip = self.trip_count(start, stop, step, iterator)
        body, condition = node.body, None
        guard = self.loop_guard(node)
        if guard is not None:
            body, condition = node.body[1:], guard
        self.compile_loop(node, trip, condition, body, (node.target.id, start, step), None)

    def loop_guard(self, node: ast.For) -> ir.Value | None:
        """The Loop's condition input when the body starts with ``if not c: break``.

        With ``c`` a tensor the body does not assign, that guard only says "run no
        (further) iteration unless c", which is what a Loop's condition input means:
        ``Loop(n, c)`` whose body passes its condition through.  None otherwise.
        """
        first = node.body[0] if node.body else None
        if not (isinstance(first, ast.If) and not first.orelse and len(first.body) == 1
                and isinstance(first.body[0], ast.Break) and isinstance(first.test, ast.UnaryOp)
                and isinstance(first.test.op, ast.Not) and isinstance(first.test.operand, ast.Name)):
            return None
        name = first.test.operand.id
        binding = self.scope.lookup(name)
        if not isinstance(binding, ir.Value) or name in assigned_names(node.body) or len(node.body) < 2:
            return None
        return self.scalar_condition(self.condition_value(binding, first.test), first.test)

    def int64(self, operand: Any, node: ast.AST) -> Any:
        """A loop bound as an INT64 tensor, or a Python int when it is a constant."""
        if isinstance(operand, PyValue):
            return int(operand.value)
        value = self.as_value(operand, node, elem=_INT64)
        if self.ctx.elem(value) != _INT64:
            value = self.builder.operator("Cast", [value], self.loc(node), to=_INT64)
        return value

    def arith(self, op_type: str, left: Any, right: Any, node: ast.AST) -> Any:
        """INT64 arithmetic on a mix of tensors and Python ints (folded when both are ints)."""
        if isinstance(left, int) and isinstance(right, int):
            return {"Add": left + right, "Sub": left - right, "Mul": left * right}[op_type]
        if op_type in ("Add", "Sub") and isinstance(right, int) and right == 0:
            return left
        if op_type == "Mul" and isinstance(right, int) and right == 1:
            return left
        left_value = left if isinstance(left, ir.Value) else self.as_value(PyValue(left), node, elem=_INT64)
        right_value = right if isinstance(right, ir.Value) else self.as_value(PyValue(right), node, elem=_INT64)
        return self.builder.operator(op_type, [left_value, right_value], self.loc(node))

    def trip_count(self, start: Any, stop: Any, step: Any, node: ast.AST) -> ir.Value:
        """(stop - start + step - sign(step)) / step with truncating Div: len(range(...)), or a
        number <= 0 where the range is empty, and a Loop runs zero times for any trip count
        <= 0.  So ``range(n)`` is just ``n``: no node beyond a Cast to INT64 where needed."""
        start_i, stop_i, step_i = (self.int64(o, node) for o in (start, stop, step))
        span = self.arith("Sub", stop_i, start_i, node)
        if isinstance(step_i, int):
            span = self.arith("Add", span, step_i - (1 if step_i > 0 else -1), node)
        else:
            sign = self.builder.operator("Sign", [step_i], self.loc(node))
            span = self.arith("Sub", self.arith("Add", span, step_i, node), sign, node)
        if not (isinstance(step_i, int) and step_i == 1):
            step_value = step_i if isinstance(step_i, ir.Value) else self.as_value(PyValue(step_i), node, elem=_INT64)
            span = self.builder.operator("Div", [span, step_value], self.loc(node))
        if isinstance(span, int):
            return self.as_value(PyValue(span), node, elem=_INT64)
        return span

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise UnsupportedSyntaxError("while/else is not supported", self.loc(node.orelse[0]),
                                         hint="use a flag variable set before break")
        initial = self.expr(node.test)
        if isinstance(initial, PyValue) and not self.truth(initial, node.test):
            return None
        condition = self.scalar_condition(self.condition_value(initial, node.test), node.test)
        self.compile_loop(node, None, condition, node.body, None, node.test)
        return None

    def scalar_condition(self, condition: ir.Value, node: ast.AST) -> ir.Value:
        """A Loop condition as the rank-0 tensor onnxruntime insists on.

        ``while op.ReduceMax(x) > t`` compares a one-element rank-1 tensor (ReduceMax keeps
        the reduced axis), which Python accepts; the Loop's condition must be a scalar,
        so such a condition is reshaped to ``[]`` unless it is known to be one already.
        """
        if known_scalar(condition):
            return condition
        no_axes = self.own_constant(empty_shape(), node)
        return self.builder.operator("Reshape", [condition, no_axes], self.loc(node))

    def own_constant(self, array: np.ndarray, node: ast.AST) -> ir.Value:
        """A Constant node of its own (not shared with equal literals, as ``as_value`` does),
        so that the nodes a loop adds around its condition always have the same shape,
        whatever the rest of the function holds (the forms of :mod:`dsl.loop_forms`)."""
        return self.builder.operator("Constant", [], self.loc(node), value=array)

    def compile_loop(
        self, node: ast.stmt, trip: Any, condition: ir.Value | None, body: list[ast.stmt],
        loop_variable: tuple[str, Any, Any] | None, while_test: ast.expr | None,
    ) -> None:
        location = self.loc(node)
        variable_name = loop_variable[0] if loop_variable is not None else None
        assigned = [n for n in assigned_names(body) if n != variable_name]
        carried: list[tuple[str, ir.Value]] = []
        for name in assigned:
            binding = self.scope.lookup(name)
            if binding is None or _not_a_value(binding):
                continue
            carried.append((name, self.as_value(binding, node)))
        loop_body, keep_going, shapes = self.invariant_loop_body(node, carried, body, loop_variable, while_test)
        for name in assigned:
            if self.scope.lookup(name) is None:
                self.scope.bind(name, Undefined(
                    f"{name!r} is only assigned inside the loop at line {location.line}",
                    "assign an initial value before the loop to use it afterwards",
                ))
        if variable_name is not None:
            self.scope.bind(variable_name, Undefined(
                f"the loop variable {variable_name!r} is not available after the loop",
                "keep the value you need in a variable assigned before the loop",
            ))
        if not carried:
            return  # a loop that changes nothing computes nothing
        if trip is not None and isinstance(keep_going, PyValue) and condition is None:
            condition_input = None
        elif condition is None:
            condition_input = self.own_constant(np.array(True), node)
        else:
            condition_input = condition
        outputs = self.emit_loop(node, trip, condition_input, carried, loop_body)
        for output, shape in zip(outputs, shapes):
            self.ctx.shapes.set(output, shape)  # (the loop's results keep the invariant shapes)
        if isinstance(while_test, ast.Name) and isinstance(keep_going, PyValue) and len(carried) > 1:
            position = next((k for k, (name, _) in enumerate(carried) if name == while_test.id), None)
            if position is not None:
                self.while_conditions.append(outputs[position])

    def invariant_loop_body(
        self, node: ast.stmt, carried: list[tuple[str, ir.Value]], body: list[ast.stmt],
        loop_variable: tuple[str, Any, Any] | None, while_test: ast.expr | None,
    ) -> tuple[ir.Graph, Any, list[Shape]]:
        """The body of a Loop compiled with each carried value's invariant shape: its shape at
        loop entry, keeping only the sizes the body gives back unchanged (a fixed point), so
        a mistake on a carried value (``h = h @ w`` with the wrong ``w``) is refused at its line.

        The first pass uses the entry shapes, which the first iteration really has, so what
        it refuses is a mistake; a pass whose results disagree is compiled again with only
        the agreeing sizes (at most ``_SHAPE_PASSES`` times, then with no shapes), its values
        dropped so that names stay as one pass would give them.
        """
        ctx = self.ctx
        shapes = [ctx.shapes.shape(initial) for _, initial in carried]
        passes = 1
        while True:
            mark = len(ctx.values)
            graph, keep_going, finals = self.loop_body(node, carried, body, loop_variable, while_test, shapes)
            agreed = [_agreeing(entry, ctx.shapes.shape(final)) for entry, final in zip(shapes, finals)]
            if agreed == shapes:
                return graph, keep_going, shapes
            del ctx.values[mark:]
            shapes = agreed if passes < _SHAPE_PASSES else [None] * len(carried)  # (all None agree)
            passes += 1

    def loop_body(
        self, node: ast.stmt, carried: list[tuple[str, ir.Value]], body: list[ast.stmt],
        loop_variable: tuple[str, Any, Any] | None, while_test: ast.expr | None, shapes: list[Shape],
    ) -> tuple[ir.Graph, Any, list[ir.Value]]:
        """The body graph of a Loop, what the ``@continue`` flag holds at its end, and each
        carried value's value at the end of the body; ``shapes`` are the carried values'
        shapes at the start of the body."""
        ctx = self.ctx
        location = self.loc(node)
        variable_name = loop_variable[0] if loop_variable is not None else None
        builder = GraphBuilder(ctx, "loop_body", parent=self.builder)
        builder.graph.location = location
        scope = self.scope.child()
        iteration = ctx.new_value(f"{variable_name}_index" if variable_name else "iteration", location,
                                  type=ITERATION_TYPE)
        condition_in = ctx.new_value("cond_in", location, type=CONDITION_TYPE)
        builder.graph.inputs.extend([iteration, condition_in])
        for (name, initial), shape in zip(carried, shapes):
            elem = ctx.elem(initial)
            value = ctx.new_value(name, location, type=carried_type(elem))
            ctx.origins[value] = (initial,)  # (declared with the element type only: its kind is the initial's)
            ctx.shapes.set(value, shape)
            builder.graph.inputs.append(value)
            scope.bind(name, value)
        saved = self.enter(builder, scope)
        self.loop_depth += 1
        try:
            if loop_variable is not None:
                loop_name, start, step = loop_variable
                index: Any = self.arith("Mul", iteration, self.int64(step, node), node)
                index = self.arith("Add", index, self.int64(start, node), node)
                scope.bind(loop_name, index)
            scope.bind(CONTINUE_FLAG, PyValue(True))
            self.compile_block(body)
            keep_going = scope.names[CONTINUE_FLAG]
            condition_out = self.loop_condition(keep_going, while_test, condition_in, node)
            taken: set[ir.Value] = {condition_out}
            finals = []
            outputs = []
            for (name, initial), formal in zip(carried, builder.graph.inputs[2:]):
                final = self.as_value(scope.names.get(name, formal), node, elem=ctx.elem(initial))
                finals.append(final)
                outputs.append(self.output_value(final, taken, location))
            builder.graph.outputs = [condition_out, *outputs]
        finally:
            self.loop_depth -= 1
            self.leave(saved)
        return builder.graph, keep_going, finals

    def emit_loop(
        self, node: ast.stmt, trip: Any, condition_input: ir.Value | None, carried: list[tuple[str, ir.Value]],
        body: ir.Graph,
    ) -> list[ir.Value]:
        """The Loop node; its outputs are bound to the carried names."""
        ctx = self.ctx
        location = self.loc(node)
        trip_input = None
        if trip is not None:
            trip_input = trip if isinstance(trip, ir.Value) else self.as_value(trip, node, elem=_INT64)
        attributes = {"body": ir.Attr("body", ir.AttrKind.GRAPH, body, location=location)}
        inputs = [trip_input, condition_input, *(initial for _, initial in carried)]
        loop_op = ctx.operator("Loop")
        for name, initial in carried:
            self.check_carried_kind(loop_op, name, initial, location)
        outputs = self.builder.call_op(loop_op, inputs, attributes, location, len(carried))
        for (name, initial), output in zip(carried, outputs):
            elem = ctx.elem(initial)
            if elem is not None:
                ctx.elem_types[output] = elem
            ctx.origins[output] = (initial,)
            self.bind_name(name, output)
        return outputs

    def check_carried_kind(self, op: Op, name: str | None, value: ir.Value, location: Any) -> None:
        """Refuse a sequence or optional that ``op`` (If or Loop) cannot pass at its
        version: Loop and If carry tensors only before opset 13 and no optionals before 16,
        and a model built anyway fails onnx.checker with no line of the program.  (Eager
        mode runs the Python loop or branch itself and cannot see this.)"""
        since = op.since_version
        if since is None or since >= 16:
            return
        kind = value_kind(value, self.ctx)
        if kind in (None, "tensor") or (kind == "sequence" and since >= 13):
            return
        needed = 13 if kind == "sequence" else 16
        what = ("an optional" if kind == "optional" else "a sequence") if name is None else \
            f"{name!r}, {'an optional' if kind == 'optional' else 'a sequence'}"
        raise DslTypeError(
            f"this {'loop carries' if op.name == 'Loop' else 'if gives'} {what}, but {op.name} at opset "
            f"{self.ctx.default_opset.version} ({op.name}-{since}) passes "
            f"{'tensors only' if since < 13 else 'tensors and sequences only'}",
            location,
            hint=f"compile with opset {needed} or later (from dsl import opset{needed} as op)"
            + (", or pass a tensor (op.ConcatFromSequence)" if kind == "sequence" else
               ", or pass the value with a BOOL saying whether it is there"),
        )

    def loop_condition(self, keep_going: Any, while_test: ast.expr | None, condition_in: ir.Value,
                       node: ast.AST) -> ir.Value:
        location = self.loc(node)
        if while_test is None:
            if isinstance(keep_going, PyValue) and keep_going.value:
                return self.builder.operator("Identity", [condition_in], location)
            value = self.condition_value(keep_going, node)
        elif isinstance(keep_going, PyValue):
            if not keep_going.value:
                value = self.condition_value(PyValue(False), node)
            else:
                value = self.scalar_condition(self.condition_value(self.expr(while_test), while_test), while_test)
        else:
            test = self.scalar_condition(self.condition_value(self.expr(while_test), while_test), while_test)
            value = self.builder.operator("And", [self.condition_value(keep_going, node), test], location)
        if value not in self.builder.produced:
            value = self.builder.operator("Identity", [value], location)
        return value


_SHAPE_PASSES = 3  # passes that may narrow the carried shapes before the body is compiled without them


def _agreeing(entry: Shape, final: Shape) -> Shape:
    """The sizes two shapes of one value share, by axis (None where the ranks differ)."""
    if entry is None or final is None or len(entry) != len(final):
        return None
    return tuple(a if a == b else None for a, b in zip(entry, final))


def _not_a_value(operand: Any) -> bool:
    return operand is None or isinstance(operand, (Undefined, GraphDef, ValueTuple))


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
