"""The canonical If and Loop shapes: how ``@script`` lowers ``if``/``for``/``while``, and
which nodes a back end may write back as that Python.

The compiler (:mod:`dsl.frontend.control_flow`) emits these forms; the Python back end
(:mod:`converter.python_source`) writes ``if``/``for``/``while`` only for nodes in exactly
these forms, so that compiling its output gives the very same nodes again::

    if c: ... else: ...                    If(c), each branch computing its own outputs
    for i in range(n):                     Loop(n, "", v...), body condition Identity(cond_in)
    for i in range(n):                     Loop(n, c, v...), body condition Identity(cond_in)
        if not c: break
    for i in range(n): ...; if b: break    Loop(n, Constant(True), v...), body condition Not(b)
    k = c / while k: ...; k = d            Loop("", c, v...), body condition d

A Loop condition is a rank-0 BOOL tensor: one the compiler cannot prove to be a scalar
(:func:`known_scalar`) is wrapped in ``Reshape(c, Constant(empty_shape()))``, both nodes
of their own.  A body's inputs are the iteration number (:data:`ITERATION_TYPE`), the
condition (:data:`CONDITION_TYPE`) and the loop-carried values (:func:`carried_type`).
Everything here reads the IR only; :func:`plan_loops` and :func:`if_form` decide from the
structure alone, conservatively (what the compiler certainly reproduces).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from dsl import ir, types

__all__ = [
    "SCALAR_PRESERVING",
    "BOOL_OPS",
    "INT64_OPS",
    "ITERATION_TYPE",
    "CONDITION_TYPE",
    "carried_type",
    "empty_shape",
    "known_scalar",
    "IfForm",
    "if_form",
    "LoopPlan",
    "LoopPlans",
    "plan_loops",
]

_BOOL, _INT64 = types.BOOL.enum, types.INT64.enum
_MAX_DEPTH = 6  # how far known_scalar follows producers (a short walk, never the whole graph)
# Element types an annotation can spell: a declared input keeps its type through the source.
_SPELLED_TYPES = frozenset(t.enum for t in types.ELEMENT_TYPES.values())

# Ops whose result is a scalar when every input is one (no broadcasting to a higher rank).
SCALAR_PRESERVING = frozenset({
    "Not", "And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "Cast", "CastLike", "Identity", "Add", "Sub", "Mul", "Div", "Neg", "Abs",
})
# Ops whose output the compiler knows to be BOOL, or INT64, whatever their inputs.
BOOL_OPS = frozenset({"Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "Not",
                      "IsNaN", "IsInf"})
INT64_OPS = frozenset({"Shape", "Size", "SequenceLength", "ArgMax", "ArgMin", "NonZero"})

# The types of a Loop body's first two inputs, as the compiler declares them.
ITERATION_TYPE = ir.TensorType(_INT64, ())
CONDITION_TYPE = ir.TensorType(_BOOL, ())


def carried_type(elem_type: int | None) -> ir.TensorType | None:
    """The declared type of a loop-carried body input: its element type, any shape."""
    return None if elem_type is None else ir.TensorType(elem_type, None)


def empty_shape() -> np.ndarray:
    """The shape operand of the ``Reshape`` that makes a Loop condition rank 0."""
    return np.zeros(0, dtype=np.int64)


def known_scalar(value: ir.Value, depth: int = 0) -> bool:
    """Whether ``value`` is certainly rank 0 as the compiler builds it: declared so, a scalar
    constant, or an elementwise op over such values."""
    declared = value.type
    if isinstance(declared, ir.TensorType) and declared.shape is not None:
        return declared.shape == ()
    producer = value.producer
    if producer is None or producer.domain != "" or depth > _MAX_DEPTH:
        return False
    if producer.op_type == "Constant":
        return _scalar_constant(producer)
    if producer.op_type in SCALAR_PRESERVING:
        return all(i is not None and known_scalar(i, depth + 1) for i in producer.inputs)
    return False


def _scalar_constant(node: ir.Node) -> bool:
    payload = node.attributes.get("value")
    if payload is None:  # value_int / value_float / value_string are scalars by definition
        return any(name in node.attributes for name in ("value_int", "value_float", "value_string"))
    return isinstance(payload.value, ir.Tensor) and payload.value.array.ndim == 0


# ------------------------------------------------------------------------------- If


@dataclass(slots=True)
class IfForm:
    """An If written ``if condition: ... else: ...``; with ``aliases`` the then-branch does
    not compute its outputs in output order, so it ends by assigning them."""

    condition: ir.Value
    then_branch: ir.Graph
    else_branch: ir.Graph
    aliases: bool


def if_form(node: ir.Node) -> IfForm | None:
    """``node`` as the ``if`` statement the compiler turns back into this very If, or None.

    The compiler makes an If output of each name assigned in both branches, in the order
    the then-branch first assigns them; so every branch output must be computed in its
    branch (not an outer value, not twice the same value), and the condition must be
    known to be BOOL (else the compiler casts it).
    """
    if node.op_type != "If" or node.domain != "" or node.callee is not None or len(node.attributes) != 2:
        return None
    then_attr, else_attr = node.attributes.get("then_branch"), node.attributes.get("else_branch")
    if then_attr is None or else_attr is None or then_attr.ref_attr_name is not None:
        return None
    if else_attr.ref_attr_name is not None:
        return None
    then_branch, else_branch = then_attr.value, else_attr.value
    if not isinstance(then_branch, ir.Graph) or not isinstance(else_branch, ir.Graph):
        return None  # (a malformed If: a branch of another kind, which op.If reports)
    condition = node.inputs[0] if len(node.inputs) == 1 else None
    if condition is None or not node.outputs or any(not v.name for v in node.outputs) or not _is_bool(condition):
        return None
    for branch in (then_branch, else_branch):
        if branch.inputs or len(branch.outputs) != len(node.outputs) or not _outputs_computed_here(branch):
            return None
    positions = {id(v): (i, j) for i, n in enumerate(then_branch.nodes) for j, v in enumerate(n.outputs)}
    order = [positions[id(v)] for v in then_branch.outputs]
    aliases = order != sorted(order) or len(set(order)) != len(order)
    return IfForm(condition, then_branch, else_branch, aliases)


def _is_bool(value: ir.Value) -> bool:
    if isinstance(value.type, ir.TensorType) and value.type.elem_type == _BOOL:
        return True
    producer = value.producer
    return producer is not None and producer.domain == "" and producer.op_type in BOOL_OPS


def _outputs_computed_here(branch: ir.Graph) -> bool:
    """Each output of ``branch`` computed by one of its nodes, no value twice, no ``_`` target."""
    produced: set[int] = set()
    for node in branch.nodes:
        if _omits_a_middle_output(node):
            return False  # an omitted middle output is written ``_``, which both branches would assign
        produced.update(id(v) for v in node.outputs)
    ids = [id(v) for v in branch.outputs]
    return len(set(ids)) == len(ids) and all(i in produced for i in ids)


def _omits_a_middle_output(node: ir.Node) -> bool:
    present = len(node.outputs)
    while present and not node.outputs[present - 1].name:
        present -= 1
    return any(not v.name for v in node.outputs[:present])


# ----------------------------------------------------------------------------- Loop


@dataclass(slots=True)
class LoopPlan:
    """How a Loop is written: ``form`` is "for" or "while"; ``condition`` the value the
    ``if not c: break`` guard (for) or the loop test (while) starts from; ``final`` the
    ``if b: break`` value (for) or the test's value at the end of the body (while)."""

    form: str
    condition: ir.Value | None = None
    final: ir.Value | None = None


@dataclass(slots=True)
class LoopPlans:
    """The plan of each Loop written as Python, and the nodes whose Python those loops
    stand for (the condition's Constant, Not and Reshape nodes the compiler makes again)."""

    plans: dict[ir.Node, LoopPlan] = field(default_factory=dict)
    absorbed: set[ir.Node] = field(default_factory=set)


@dataclass(slots=True)
class _Facts:
    """What the planner knows of one graph: uses of each value, the graph each node is in,
    and the role of each Loop body input (the compiler types those its own way)."""

    uses: dict[ir.Value, int]
    graph_of: dict[ir.Node, ir.Graph]
    roles: dict[ir.Value, str]  # body input -> "iteration" | "condition" | "carried"

    def used(self, value: ir.Value) -> int:
        return self.uses.get(value, 0)

    def owner(self, node: ir.Node | None) -> ir.Graph | None:
        """The graph ``node`` is in (None for no node, or one outside the planned graph)."""
        return None if node is None else self.graph_of.get(node)


def plan_loops(graph: ir.Graph) -> LoopPlans:
    """Plans for every Loop of ``graph`` and its subgraphs that Python can write."""
    graph_of: dict[ir.Node, ir.Graph] = {}
    loops: list[ir.Node] = []
    for node, owner in ir.walk(graph):
        graph_of[node] = owner
        if node.op_type == "Loop":
            loops.append(node)
    found = LoopPlans()
    if not loops:
        return found
    roles: dict[ir.Value, str] = {}
    for loop in loops:
        body = _loop_body(loop)
        if body is not None:
            for position, formal in enumerate(body.inputs):
                roles[formal] = ("iteration", "condition")[position] if position < 2 else "carried"
    facts = _Facts(ir.use_counts(graph), graph_of, roles)
    for loop in loops:
        planned = _plan_loop(loop, facts)
        if planned is not None:
            plan, eaten = planned
            found.plans[loop] = plan
            found.absorbed.update(eaten)
    return found


def _loop_body(loop: ir.Node) -> ir.Graph | None:
    if loop.domain != "" or loop.callee is not None or len(loop.attributes) != 1:
        return None
    attr = loop.attributes.get("body")
    if attr is None or attr.kind != ir.AttrKind.GRAPH or attr.ref_attr_name is not None:
        return None
    return attr.value if isinstance(attr.value, ir.Graph) else None


def _plan_loop(loop: ir.Node, facts: _Facts) -> tuple[LoopPlan, list[ir.Node]] | None:
    body = _loop_body(loop)
    if body is None or not _plain_loop_shape(loop, body):
        return None
    trip, condition = loop.inputs[0], loop.inputs[1]
    iteration, condition_in, condition_out = body.inputs[0], body.inputs[1], body.outputs[0]
    if trip is None:  # k = c; while k: ...; k = d
        if condition is None or facts.used(iteration) or facts.used(condition_in):
            return None
        start = _condition_source(condition, facts, facts.graph_of[loop])
        end = _condition_source(condition_out, facts, body, output=True)
        if start is None or end is None:
            return None
        return LoopPlan("while", condition=start[0], final=end[0]), [*start[1], *end[1]]
    if not _compiler_knows_elem(trip, facts, _INT64, INT64_OPS):
        return None
    passed = condition_out.producer  # Identity(cond_in): the body passes its condition through
    if not (_is_plain(passed, "Identity", 1) and passed.inputs[0] is condition_in
            and facts.used(condition_out) == 1 and facts.used(condition_in) == 1):
        return None if condition is None else _plan_final_break(loop, body, facts)
    if condition is None:  # for i in range(n)
        return LoopPlan("for"), [passed]
    start = _condition_source(condition, facts, facts.graph_of[loop])  # for i in range(n): if not c: break
    if start is None:
        return None
    return LoopPlan("for", condition=start[0]), [*start[1], passed]


def _plain_loop_shape(loop: ir.Node, body: ir.Graph) -> bool:
    """No scan outputs, every carried value named and present, nothing written ``_``."""
    if len(loop.inputs) < 3 or body.initializers or body.sparse_initializers:
        return False
    carried = len(loop.inputs) - 2
    if any(v is None for v in loop.inputs[2:]) or any(not v.name for v in loop.outputs):
        return False
    if len(body.inputs) != 2 + carried or len(body.outputs) != 1 + carried or len(loop.outputs) != carried:
        return False
    # (an omitted middle output anywhere in the body is written ``_``, which the compiler
    # would carry through the loop like any name assigned before it)
    return _outputs_computed_here(body) and not any(_omits_a_middle_output(node) for node, _ in ir.walk(body))


def _plan_final_break(loop: ir.Node, body: ir.Graph, facts: _Facts) -> tuple[LoopPlan, list[ir.Node]] | None:
    """``for i in range(n): ... if b: break``: Loop(n, True, ...) whose condition is Not(b)."""
    condition, condition_in = loop.inputs[1], body.inputs[1]
    assert condition is not None
    constant = condition.producer
    if facts.used(condition_in) or not _is_true_constant(constant) or facts.used(condition) != 1:
        return None
    if facts.owner(constant) is not facts.graph_of[loop]:
        return None
    stop = _break_source(body.outputs[0], facts, body)
    if stop is None:
        return None
    broken_by, eaten = stop
    return LoopPlan("for", final=broken_by), [constant, *eaten]


def _is_plain(node: ir.Node | None, op_type: str, input_count: int) -> TypeGuard[ir.Node]:
    return (node is not None and node.op_type == op_type and node.domain == "" and node.callee is None
            and not node.attributes and len(node.inputs) == input_count and None not in node.inputs)


def _condition_source(
    value: ir.Value, facts: _Facts, graph: ir.Graph, output: bool = False
) -> tuple[ir.Value, list[ir.Node]] | None:
    """The Python-level condition that compiles to ``value`` (a Loop condition input, or
    with ``output`` a body's condition output), and the nodes the compiler makes for it."""
    if _compiler_knows_elem(value, facts, _BOOL, BOOL_OPS) and _compiled_scalar(value, facts) is True:
        if output and (value.producer is None or facts.owner(value.producer) is not graph):
            return None  # an outer value or an input would be copied with Identity
        return value, []
    reshape = value.producer
    if not _is_plain(reshape, "Reshape", 2) or facts.owner(reshape) is not graph or facts.used(value) != 1:
        return None
    source, shape = reshape.inputs[0], reshape.inputs[1]
    assert source is not None and shape is not None
    shape_node = shape.producer
    if not _is_empty_shape_constant(shape_node) or facts.used(shape) != 1:
        return None
    if facts.owner(shape_node) is not graph:
        return None
    if not _compiler_knows_elem(source, facts, _BOOL, BOOL_OPS) or _compiled_scalar(source, facts) is not False:
        return None
    return source, [reshape, shape_node]


def _break_source(value: ir.Value, facts: _Facts, body: ir.Graph) -> tuple[ir.Value, list[ir.Node]] | None:
    """``b`` when a body's condition output is what ``if b: break`` compiles to: Not(b),
    reshaped to a scalar when the compiler cannot prove ``b`` is one."""
    eaten: list[ir.Node] = []
    negation = value.producer
    scalar_wanted = True
    if _is_plain(negation, "Reshape", 2) and facts.owner(negation) is body:
        reshaped, shape = negation.inputs[0], negation.inputs[1]
        assert reshaped is not None and shape is not None
        shape_node = shape.producer
        if not _is_empty_shape_constant(shape_node) or facts.used(shape) != 1 or facts.used(value) != 1:
            return None
        if facts.owner(shape_node) is not body:
            return None
        eaten += [negation, shape_node]
        value, negation = reshaped, reshaped.producer
        scalar_wanted = False
    if not _is_plain(negation, "Not", 1) or facts.owner(negation) is not body or facts.used(value) != 1:
        return None
    broken_by = negation.inputs[0]
    assert broken_by is not None
    if not _compiler_knows_elem(broken_by, facts, _BOOL, BOOL_OPS):
        return None
    if _compiled_scalar(broken_by, facts) is not scalar_wanted:
        return None
    return broken_by, [*eaten, negation]


def _constant_array(node: ir.Node | None) -> np.ndarray | None:
    """The data of a plain ``Constant(value=tensor)`` node, else None."""
    if node is None or node.op_type != "Constant" or node.domain != "" or set(node.attributes) != {"value"}:
        return None
    payload = node.attributes["value"].value
    return payload.array if isinstance(payload, ir.Tensor) else None


def _is_empty_shape_constant(node: ir.Node | None) -> TypeGuard[ir.Node]:
    array = _constant_array(node)
    return array is not None and array.dtype == np.int64 and array.shape == (0,)


def _is_true_constant(node: ir.Node | None) -> TypeGuard[ir.Node]:
    array = _constant_array(node)
    return array is not None and array.dtype == np.bool_ and array.shape == () and bool(array)


def _compiler_knows_elem(value: ir.Value, facts: _Facts, elem_type: int, typed_ops: frozenset[str]) -> bool:
    """Whether the compiler's element-type tracking certainly gives ``value`` ``elem_type``
    (so it adds no Cast): a declared input, an op whose output type is fixed
    (``typed_ops``), a Cast to it, or a Constant of it; loop-carried values and
    conditions are unknown inside a body."""
    producer = value.producer
    if producer is None:
        role = facts.roles.get(value)
        declared = value.type
        if value.initializer is not None or role in ("carried", "condition"):
            return False
        if role == "iteration":
            return declared == ir.TensorType(elem_type, ())
        return isinstance(declared, ir.TensorType) and declared.elem_type == elem_type
    if producer.domain != "" or producer.callee is not None:
        return False
    if producer.op_type in typed_ops:
        return True
    if producer.op_type == "Cast":
        to = producer.attributes.get("to")
        return to is not None and to.ref_attr_name is None and to.value == elem_type
    if producer.op_type == "Constant" and set(producer.attributes) == {"value"}:
        payload = producer.attributes["value"].value
        return isinstance(payload, ir.Tensor) and payload.elem_type == elem_type
    return False


def _compiled_scalar(value: ir.Value, facts: _Facts, depth: int = 0) -> bool | None:
    """What :func:`known_scalar` will say of ``value`` once the compiler rebuilt it from
    the Python: True, False, or None where that cannot be told from here."""
    producer = value.producer
    if producer is None:
        return _compiled_scalar_input(value, facts)
    if producer.callee is not None:
        return None
    if producer.domain != "" or depth > _MAX_DEPTH:
        return False
    if producer.op_type == "Constant":
        return _scalar_constant(producer)
    if producer.op_type not in SCALAR_PRESERVING:
        return False
    result: bool | None = True
    for operand in producer.inputs:
        if operand is None:
            return False
        known = _compiled_scalar(operand, facts, depth + 1)
        if known is False:
            return False
        if known is None:
            result = None
    return result


def _compiled_scalar_input(value: ir.Value, facts: _Facts) -> bool | None:
    if value.initializer is not None:
        return None
    declared = value.type
    is_scalar = isinstance(declared, ir.TensorType) and declared.shape == ()
    role = facts.roles.get(value)
    if role == "carried":  # declared with an unknown shape (carried_type)
        return None if is_scalar else False
    if role is not None:  # iteration number and condition: scalars either way when declared so
        return True if is_scalar else None
    if isinstance(declared, ir.TensorType) and declared.elem_type in _SPELLED_TYPES and declared.shape is not None:
        return declared.shape == ()
    return False
