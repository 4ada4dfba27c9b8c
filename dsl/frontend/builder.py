"""Emitting IR: one :class:`GraphBuilder` per graph (function body, branch, loop body),
sharing one :class:`CompileContext` per compiled function.

Element types of intermediate values are tracked in a side table
(``CompileContext.elem_types``), not written on ``Value.type``: they decide literal
types and operator spellings at compile time and catch type mismatches early, while
the IR keeps only the types the user wrote, plus ``TensorType(elem, None)`` on
unannotated function outputs and loop-carried body inputs whose element type is known;
shapes are left to ONNX shape inference.
Checks and type rules of each (op, input types) pair are cached, so a long function
costs the same per statement as a short one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsl import ir, types
from dsl.errors import DslTypeError
from dsl.frontend.names import NameAllocator
from dsl.frontend.static_shapes import ShapeTable
from dsl.opsets import Op, Opset
from dsl.shape_rules_inputs import ELEMENT_RULES, check_element_types

__all__ = ["CompileContext", "GraphBuilder"]

# Ops whose output element type depends on attribute values: never cached.
_ATTRIBUTE_TYPED = frozenset(
    {"Cast", "CastLike", "Constant", "ConstantOfShape", "EyeLike", "RandomNormalLike",
     "RandomUniformLike", "Bernoulli", "RandomNormal", "RandomUniform"}
)
_OUTPUT_TYPES: dict[tuple[Op, tuple[int | None, ...]], list[int | None]] = {}
_CHECKED_TYPES: set[tuple[Op, tuple[int | None, ...]]] = set()

_BASE_NAMES: dict[str, str] = {}
_DEFAULT_OUTPUT_COUNTS: dict[Op, int] = {}
_REQUIRED_ATTRIBUTES: dict[Op, frozenset[str]] = {}


def default_output_count(op: Op) -> int:
    """``op.default_output_count()``, cached: schema properties are slow to read."""
    found = _DEFAULT_OUTPUT_COUNTS.get(op)
    if found is None:
        found = _DEFAULT_OUTPUT_COUNTS[op] = op.default_output_count()
    return found


def check_call(op: Op, input_count: int, attribute_names: list[Any], location: Any) -> None:
    """``op.check_call`` with the schema's required attributes read once per op."""
    for name in attribute_names:  # first: a misspelt keyword also leaves an input count short
        op.check_attribute_name(name, location)
    op.check_inputs(input_count, location)
    required = _REQUIRED_ATTRIBUTES.get(op)
    if required is None:
        schema = op.schema
        required = frozenset() if schema is None else frozenset(
            name for name, attribute in schema.attributes.items() if attribute.required
        )
        _REQUIRED_ATTRIBUTES[op] = required
    if required and not required.issubset(attribute_names):
        op.check_required_attributes(set(attribute_names), location)


_CONSTANT_REF_ATTRIBUTE = {
    ir.AttrKind.INT: ("value_int", types.INT64.enum),
    ir.AttrKind.FLOAT: ("value_float", types.FLOAT.enum),
    ir.AttrKind.STRING: ("value_string", types.STRING.enum),
    ir.AttrKind.INTS: ("value_ints", types.INT64.enum),
    ir.AttrKind.FLOATS: ("value_floats", types.FLOAT.enum),
    ir.AttrKind.STRINGS: ("value_strings", types.STRING.enum),
    ir.AttrKind.TENSOR: ("value", None),
}


class CompileContext:
    """State shared by every graph of one compiled function."""

    def __init__(self, default_opset: Opset) -> None:
        self.values: list[ir.Value] = []
        # None (an omitted optional input) is never stored but may be looked up, so that
        # call_op can map .get over a node's inputs without a filter
        self.elem_types: dict[ir.Value | None, int] = {}
        self.auto_named: set[ir.Value] = set()
        self.default_opset = default_opset
        self.opsets_used: dict[str, tuple[int, Any]] = {}
        self.ops: dict[str, Op] = {}  # default-opset ops by name, for Python operators
        self.shapes = ShapeTable()
        # An If's or Loop's output, or a Loop body's carried input -> the values it is one
        # of (the branches' values; the carried value's initial value), whose kind it has
        # (see dsl.frontend.value_kinds).
        self.origins: dict[ir.Value, tuple[ir.Value, ...]] = {}

    # ------------------------------------------------------------------ values
    def new_value(self, base: str, location: Any = None, auto: bool = False, type: Any = None) -> ir.Value:
        """A value named ``base`` for now; :meth:`finalize_names` makes names unique at the end."""
        value = ir.Value(base, type=type, location=location)
        self.values.append(value)
        if auto:
            self.auto_named.add(value)
        if isinstance(type, ir.TensorType):
            self.elem_types[value] = type.elem_type
        return value

    def rename(self, value: ir.Value, base: str) -> None:
        """Give an auto-named value the name of the variable it is assigned to."""
        self.auto_named.discard(value)
        value.name = base

    def finalize_names(self, graph: ir.Graph) -> None:
        """Make every value name unique across the function, subgraphs included.

        Inputs and initializers keep their names, outputs come next (so a returned
        ``y`` is called ``y``), then every other value in creation order gets its base
        name or ``base_1``, ``base_2``...  One pass, so naming costs nothing per rename.
        An empty name (an omitted optional output) stays empty.
        """
        names = NameAllocator()
        first: set[ir.Value] = set()
        for value in [*graph.inputs, *graph.initializers, *graph.outputs]:
            if value not in first:
                first.add(value)
                if value.name:
                    value.name = names.fresh(value.name)
        fresh = names.fresh
        for value in self.values:  # each value once: only inputs and outputs can repeat
            if value.name and value not in first:
                value.name = fresh(value.name)

    def elem(self, value: Any) -> int | None:
        if value is None:
            return None
        found = self.elem_types.get(value)
        if found is None and isinstance(value.type, ir.TensorType):
            return value.type.elem_type
        return found

    # ------------------------------------------------------------------ opsets
    def use_opset(self, domain: str, version: int, location: Any) -> None:
        previous = self.opsets_used.get(domain)
        if previous is None:
            self.opsets_used[domain] = (version, location)
        elif previous[0] != version:
            where = f" (first at {previous[1]})" if previous[1] is not None else ""
            raise DslTypeError(
                f"this function uses {domain or 'ai.onnx'} versions {previous[0]}{where} and {version}",
                location,
                hint="a function imports one version per domain; use the same opsetN everywhere",
            )

    def operator(self, name: str) -> Op:
        """The default opset's op behind a Python operator (``+`` -> Add)."""
        return self.default_opset.get_op(name)


class GraphBuilder:
    """Appends nodes to one graph; ``parent`` is the builder of the enclosing graph."""

    __slots__ = ("_constants", "ctx", "graph", "parent", "produced")

    def __init__(self, ctx: CompileContext, name: str, parent: GraphBuilder | None = None) -> None:
        self.ctx = ctx
        self.graph = ir.Graph(name)
        self.parent = parent
        self.produced: set[ir.Value] = set()
        self._constants: dict[Any, ir.Value] = {}

    def add_node(
        self,
        op_type: str,
        domain: str,
        inputs: list[ir.Value | None],
        attributes: dict[str, ir.Attr],
        output_count: int,
        location: Any,
        output_elems: list[int | None] | None = None,
        callee: ir.Function | None = None,
    ) -> list[ir.Value]:
        """Append a node with ``output_count`` fresh auto-named outputs."""
        ctx = self.ctx
        base = _BASE_NAMES.get(op_type)
        if base is None:
            base = _BASE_NAMES[op_type] = op_type.lower()
        if output_count == 1:  # most nodes: no comprehension (a function call of its own before Python 3.12)
            outputs = [ir.Value(base, location=location)]
        else:
            outputs = [ir.Value(base, location=location) for _ in range(output_count)]
        node = ir.Node(op_type, domain, inputs, outputs, attributes)
        node.callee = callee  # set, not passed: keyword arguments make the constructor 1.5x slower
        node.location = location
        for value in outputs:
            value.producer = node
        ctx.values.extend(outputs)
        ctx.auto_named.update(outputs)
        self.produced.update(outputs)
        if output_elems:
            elem_types = ctx.elem_types
            for value, elem in zip(outputs, output_elems):
                if elem is not None:
                    elem_types[value] = elem
        self.graph.nodes.append(node)
        return outputs

    def call_op(
        self,
        op: Op,
        inputs: list[ir.Value | None],
        attributes: dict[str, ir.Attr],
        location: Any,
        output_count: int | None = None,
        names: Sequence[str] | None = None,
    ) -> list[ir.Value]:
        """Append a node of a schema'd (or custom-domain) op, checking input types where known
        and inferring its output shapes (:mod:`dsl.shape_rules`); ``names`` are the operands'
        source text for the messages."""
        ctx = self.ctx
        opset = op.opset
        used = ctx.opsets_used.get(opset.domain)
        if used is None or used[0] != opset.version:
            ctx.use_opset(opset.domain, opset.version, location)
        elems = tuple(map(ctx.elem_types.get, inputs))
        if None in elems:  # typed only by an annotation, omitted, or unknown
            elems = tuple([ctx.elem(v) for v in inputs])
        output_elems: list[int | None] | None = None
        if op.schema is not None:
            key = (op, elems)
            if op.name in _ATTRIBUTE_TYPED:
                if key not in _CHECKED_TYPES:
                    op.check_input_types(list(elems), location)
                    _CHECKED_TYPES.add(key)
                output_elems = op.output_elem_types(list(elems), attributes)
            else:
                output_elems = _OUTPUT_TYPES.get(key)
                if output_elems is None:  # checked once per (op, input types), then cached
                    op.check_input_types(list(elems), location)
                    output_elems = _OUTPUT_TYPES[key] = op.output_elem_types(list(elems), attributes)
        if opset.domain in ("", "ai.onnx") and op.name in ELEMENT_RULES:
            check_element_types(op.name, op.since_version, elems, attributes, location)
        count = output_count if output_count is not None else default_output_count(op)
        if output_elems is not None and len(output_elems) < count and output_elems:
            output_elems = output_elems + [output_elems[-1]] * (count - len(output_elems))
        outputs = self.add_node(op.name, opset.domain, inputs, attributes, count, location, output_elems)
        if opset.domain in ("", "ai.onnx"):
            ctx.shapes.record_node(op.name, inputs, attributes, outputs, location, names, opset.version,
                                   op.schema, elems)
        return outputs

    def operator(self, name: str, inputs: list[ir.Value | None], location: Any,
                 operand_names: Sequence[str] | None = None, **attributes: Any) -> ir.Value:
        """One-output node of the default opset with plain Python attribute values."""
        ctx = self.ctx
        op = ctx.ops.get(name)
        if op is None:
            op = ctx.ops[name] = ctx.operator(name)
        attrs = {key: op.make_attr(key, value, location) for key, value in attributes.items()} if attributes else {}
        return self.call_op(op, inputs, attrs, location, 1, operand_names)[0]

    # --------------------------------------------------------------- constants
    def find_constant(self, key: Any) -> ir.Value | None:
        builder: GraphBuilder | None = self
        while builder is not None:
            found = builder._constants.get(key)
            if found is not None:
                return found
            builder = builder.parent
        return None

    def remember_constant(self, key: Any, value: ir.Value) -> None:
        self._constants[key] = value

    def snapshot(self) -> dict[Any, ir.Value]:
        """The shared constants made so far (for :meth:`restore`, after nodes are dropped)."""
        return dict(self._constants)

    def restore(self, constants: dict[Any, ir.Value]) -> None:
        self._constants = constants

    def constant(self, tensor: ir.Tensor, location: Any) -> ir.Value:
        """A Constant node holding ``tensor``, shared with identical constants already made."""
        array = tensor.array
        if array.dtype == object:
            payload: Any = tuple(array.ravel().tolist())
        else:
            payload = array.tobytes()
        key = (tensor.elem_type, array.shape, payload)
        found = self.find_constant(key)
        if found is not None:
            return found
        # Constant has no inputs to check and its output has the tensor's element type, so
        # the node is added directly (the schema's type rules cost more than the rest).
        opset = self.ctx.default_opset
        self.ctx.use_opset(opset.domain, opset.version, location)
        attr = ir.Attr("value", ir.AttrKind.TENSOR, tensor, location=location)
        value = self.add_node("Constant", opset.domain, [], {"value": attr}, 1, location, [tensor.elem_type])[0]
        self.ctx.shapes.remember_constant(value, array)
        self.ctx.rename(value, "const")
        self._constants[key] = value
        return value

    def constant_of_param(self, param: ir.AttrParam, location: Any) -> ir.Value:
        """A Constant whose value is the function's attribute parameter (``value_int=@alpha``)."""
        key = ("@", param.name)
        found = self.find_constant(key)
        if found is not None:
            return found
        spelling = _CONSTANT_REF_ATTRIBUTE.get(param.kind)
        if spelling is None:
            raise DslTypeError(
                f"attribute parameter {param.name!r} ({param.kind.name}) cannot be used as a tensor",
                location,
                hint="only int, float, str and list attribute parameters can be used as tensors",
            )
        attr_name, elem = spelling
        op = self.ctx.operator("Constant")
        attr = ir.Attr(attr_name, param.kind, None, ref_attr_name=param.name, location=location)
        value = self.call_op(op, [], {attr_name: attr}, location, 1)[0]
        if elem is not None:
            self.ctx.elem_types[value] = elem
        self.ctx.rename(value, param.name)
        self._constants[key] = value
        return value
