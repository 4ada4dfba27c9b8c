"""IR graph -> ``torch.fx.Graph``: one fx node per ONNX node, weights as root attributes.

The builder walks a graph in order and keeps, for each IR value, the fx node (or the
folded Python constant) that holds it.  Per ONNX node, in this order: Constants are
not emitted (their value is read where it is used); If/Loop/Scan become control-flow
submodules with bodies built by a nested builder; a call of a model-local function is
built in place, its body's nodes emitted into this graph (see :meth:`GraphBuilder.call_function`);
BatchNormalization and Dropout become the training-aware submodules; an op with a kernel
in :mod:`.kernels` becomes a ``call_function``; anything else an
:class:`.eager_node.EagerNode` submodule.

Weights (initializers anywhere, float Constants that look like weights) live on the
root module only, named by :mod:`.names`, and are registered on first use, so a module
cut with ``outputs=`` holds only the weights it reads.  A body reads them, like any
value of an enclosing scope, through extra placeholders its caller fills.
"""

from __future__ import annotations

import dataclasses
import keyword
import operator
import re
from typing import Any

import numpy as np
import torch
import torch.fx

from converter.torch_module import fusion, node_forms, shape_values
from converter.torch_module.eager_node import EagerNode, one_node_model
from converter.torch_module.graph_values import to_tensor
from converter.torch_module.kernels import NEEDS_OUTPUT_COUNT, lookup
from converter.torch_module.weights import WeightTable, constant_array, fold_integers
from dsl import ir
from dsl.errors import ConversionError

__all__ = ["GraphBuilder"]

K = ir.AttrKind
_FLOAT_KINDS = (K.FLOAT, K.INT, K.STRING, K.FLOATS, K.INTS, K.STRINGS)

# (op_type, input index) whose integer constants are passed as Python ints/tuples.
SHAPE_OPERANDS: frozenset[tuple[str, int]] = frozenset(
    {("Reshape", 1), ("Expand", 1), ("Tile", 1), ("Unsqueeze", 1), ("Squeeze", 1), ("ConstantOfShape", 0),
     ("Slice", 1), ("Slice", 2), ("Slice", 3), ("Slice", 4), ("Pad", 1), ("Pad", 3), ("Split", 1),
     ("TopK", 1), ("Resize", 3), ("OneHot", 1)}
    | {(reduce, 1) for reduce in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                  "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")}
)
_FOLD_LIMIT = 64  # elements: beyond this an integer constant stays a tensor


class GraphBuilder:
    """Builds one fx graph (the model's or a body's) into ``self.graph``.

    ``owner`` is the module the graph's ``get_attr`` and ``call_module`` targets are
    registered on: the root for the main graph, the body module for a body.
    """

    def __init__(self, table: WeightTable, owner: torch.nn.Module, is_root: bool) -> None:
        self.table = table
        self.owner = owner
        self.is_root = is_root
        self.graph = torch.fx.Graph()
        self.env: dict[ir.Value, Any] = {}  # None: an optional input a function call omits
        self.shapes: dict[ir.Value, shape_values.ShapeValue] = {}  # values followed as Python ints
        self.counter = 0
        # Inside a function's body: the call's attributes its references read, the body's
        # integer Constants (foldable like the model's), the callees being built, and the
        # model's value each body input stands for.
        self.bound: dict[str, ir.Attr] | None = None
        self.local_constants: dict[ir.Value, np.ndarray] = {}
        self.calling: tuple[ir.Function, ...] = ()
        self.aliases: dict[ir.Value, ir.Value] = {}
        # Values that may hold what torch has no tensor for (strings...) though their type
        # is not recorded (an eager node's untyped outputs, a function body's inputs): their
        # readers run eagerly too.
        self.lacking: set[ir.Value] = set()

    def nested(self, owner: torch.nn.Module) -> GraphBuilder:
        """A builder for a body held by a node of this graph (it sees the same attribute bindings)."""
        builder = type(self)(self.table, owner, is_root=False)
        builder.bound, builder.calling = self.bound, self.calling
        builder.local_constants, builder.aliases = self.local_constants, self.aliases
        builder.lacking = self.lacking
        return builder

    def stored_buffer(self, value: ir.Value) -> bool:
        """Whether ``value`` is (a function input standing for) a weight kept as a buffer."""
        weight = self.table.weights.get(self.aliases.get(value, value))
        return weight is not None and not weight.is_parameter

    # ----------------------------------------------------------------- naming
    def fx_name(self, text: str) -> str:
        name = re.sub(r"\W", "_", text) or "v"
        if name[0].isdigit() or keyword.iskeyword(name):
            name = "v_" + name
        return name

    def fresh_attribute(self, stem: str) -> str:
        self.counter += 1
        return f"_{self.fx_name(stem)}_{self.counter}"

    # ----------------------------------------------------------------- values
    def placeholder(self, value: ir.Value) -> None:
        self.env[value] = self.graph.placeholder(self.fx_name(value.name))

    def read(self, value: ir.Value, fold: bool = False) -> Any:
        """The fx node or folded constant standing for ``value``."""
        if fold:
            local = self.local_constants.get(value)
            folded = self.table.folded(value, _FOLD_LIMIT) if local is None else fold_integers(local, _FOLD_LIMIT)
            if folded is not None:
                return folded
            if value in self.shapes:
                return self.shapes[value].operand()
        if value in self.env:
            return self.env[value]
        if value in self.shapes:
            node = shape_values.as_tensor(self, self.shapes[value], self.fx_name(value.name))
        elif self.is_root and value in self.table.weights:
            target = self.table.register(value, self.owner)
            node = self.graph.create_node("get_attr", target, name=self.fx_name(value.name))
        else:
            array = self.table.constant(value)
            if array is None:
                raise ConversionError(
                    f"value {value.name!r} is read before any node, input or initializer defines it",
                    value.location, hint="the graph is not in topological order, or the model is damaged",
                )
            node = self.get_constant(array, value.name)
        self.env[value] = node
        return node

    def get_constant(self, array: np.ndarray, stem: str) -> torch.fx.Node:
        """A non-persistent buffer (a plain attribute for strings) on the owner, read by get_attr."""
        name = self.fresh_attribute(stem)
        tensor = to_tensor(array)
        if isinstance(tensor, torch.Tensor):
            self.owner.register_buffer(name, tensor, persistent=False)
        else:
            setattr(self.owner, name, tensor)
        return self.graph.get_attr(name)

    # ------------------------------------------------------------------ nodes
    def build(self, graph: ir.Graph, opsets: dict[str, int], keep: set[ir.Node] | None = None) -> None:
        """Emit ``graph``'s nodes (only those in ``keep`` when given)."""
        for node in graph.nodes:
            if keep is not None and node not in keep:
                continue
            if node.domain in ("", "ai.onnx") and node.op_type == "Constant" and self.table.handles_constant(node):
                continue
            self.emit(node, opsets)

    def emit(self, node: ir.Node, opsets: dict[str, int]) -> None:
        if self.bound is not None:
            node = self.with_bound_attributes(node)
        if node.callee is not None:
            self.call_function(node, opsets)
            return
        domain = "" if node.domain == "ai.onnx" else node.domain
        if domain == "" and node.op_type == "Constant" and self.bound is not None and self.emit_local_constant(node):
            return
        if domain == "" and shape_values.fold(self, node):
            return
        version = opsets.get(domain, opsets.get("", 1))
        form = node_forms.special_form(node, version) if domain == "" and node.callee is None else None
        if form is not None:
            result, as_tuple = form(self, node, opsets)
        else:
            kernel = lookup(domain, node.op_type, version) if node.callee is None else None
            lacks = node_forms.uses_types_torch_lacks(node) or any(value in self.lacking for value in node.inputs)
            if kernel is not None and node_forms.kernel_can_take(node) and not lacks:
                result = self.call_kernel(kernel, node)
                as_tuple = node_forms.returns_tuple(domain, node.op_type)
            else:
                result = self.call_eager(node, opsets)
                as_tuple = len(node.outputs) > 1
                if lacks:
                    self.lacking.update(value for value in node.outputs if not node_forms.torch_has_type(value))
        self.bind_outputs(node, result, as_tuple)

    def call_kernel(self, kernel: Any, node: ir.Node) -> torch.fx.Node:
        inputs = list(node.inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        args = tuple(None if value is None else self.read(value, (node.op_type, index) in SHAPE_OPERANDS)
                     for index, value in enumerate(inputs))
        kwargs = {name: self.attribute_value(attr) for name, attr in node.attributes.items()}
        if (node.domain, node.op_type) in NEEDS_OUTPUT_COUNT:
            kwargs["output_count"] = len(node.outputs)
        return self.graph.create_node("call_function", kernel, args, kwargs, name=self.result_name(node))

    def attribute_value(self, attr: ir.Attr) -> Any:
        if attr.kind == K.TENSOR:
            return self.get_constant(attr.value.array, attr.name)
        if attr.kind == K.TENSORS:
            return [self.get_constant(tensor.array, attr.name) for tensor in attr.value]
        return list(attr.value) if isinstance(attr.value, list) else attr.value

    def call_eager(self, node: ir.Node, opsets: dict[str, int]) -> torch.fx.Node:
        outer = ir.outer_values([sub for sub in ir.subgraphs(node)])
        module = EagerNode(repr(node)[:200], one_node_model(node, outer, self.table.model, opsets),
                           [bool(value.name) for value in node.outputs])
        args = tuple(self.read(value) for value in node.inputs if value is not None)
        args += tuple(self.read(value) for value in outer)
        return self.call_module(module, f"eager_{node.op_type}", args, self.result_name(node))

    # -------------------------------------------------------- model-local functions
    def call_function(self, node: ir.Node, opsets: dict[str, int]) -> None:
        """Build the callee's body in place: its inputs stand for the call's (an omitted one
        for None), its attribute references read the call's attributes, its outputs become
        the call's.  Inlined rather than a submodule, so gradients flow through it like
        through any other node, and the body's weights are the caller's (on the root)."""
        callee = node.callee
        assert callee is not None
        if callee in self.calling:
            raise ConversionError(
                f"function {callee.name!r} calls itself (through {' -> '.join(f.name for f in self.calling)})",
                node.location, hint="ONNX functions may not be recursive; the model is damaged",
            )
        given = [*node.inputs, *[None] * (len(callee.inputs) - len(node.inputs))]
        # a shape value passed in stays one inside (the body's own are per call)
        shapes = {inner: self.shapes[value] for inner, value in zip(callee.inputs, given)
                  if value is not None and value in self.shapes}
        env = {inner: None if value is None else self.read(value)
               for inner, value in zip(callee.inputs, given) if inner not in shapes}
        lacking = {inner for inner, value in zip(callee.inputs, given)
                   if value is not None and (value in self.lacking or not node_forms.torch_has_type(value, True))}
        saved = (self.env, self.shapes, self.bound, self.local_constants, self.calling, self.aliases, self.lacking)
        self.aliases = {inner: self.aliases.get(value, value) for inner, value in zip(callee.inputs, node.inputs)
                        if value is not None}
        self.env, self.shapes, self.lacking = env, shapes, lacking
        self.bound = ir.bound_attributes(callee, node.attributes)
        self.local_constants = {}
        self.calling = (*self.calling, callee)
        own = {("" if domain == "ai.onnx" else domain): version for domain, version in callee.opset_imports.items()}
        try:
            self.build(callee.graph, {**opsets, **own})
            results = []
            for value in callee.outputs:
                shape = self.shapes.get(value) if value not in self.env else None
                results.append((self.read(value) if shape is None else None, shape))
        finally:
            lacked = [value in self.lacking for value in callee.outputs]
            self.env, self.shapes, self.bound, self.local_constants, self.calling, self.aliases, self.lacking = saved
        self.lacking.update(value for value, lacks in zip(node.outputs, lacked) if lacks)
        for value, (result, shape) in zip(node.outputs, results):
            if shape is not None:
                self.shapes[value] = shape
            else:
                self.env[value] = result

    def with_bound_attributes(self, node: ir.Node) -> ir.Node:
        """``node`` with its references to the function's attributes replaced by their values."""
        if self.bound is None or all(attr.ref_attr_name is None for attr in node.attributes.values()):
            return node
        attributes = {}
        for name, attr in node.attributes.items():
            resolved = ir.resolve_attribute(attr, self.bound)
            if resolved is not None:
                attributes[name] = resolved
        return dataclasses.replace(node, attributes=attributes)

    def emit_local_constant(self, node: ir.Node) -> bool:
        """A Constant of a function body: a buffer of this call, foldable like the model's."""
        if len(node.attributes) != 1 or not node.outputs:
            return False
        array = constant_array(next(iter(node.attributes.values())))
        if array is None:
            return False
        self.local_constants[node.outputs[0]] = array
        self.env[node.outputs[0]] = self.get_constant(array, node.outputs[0].name or "constant")
        return True

    def call_module(self, module: torch.nn.Module, stem: str, args: tuple[Any, ...], name: str) -> torch.fx.Node:
        target = self.fresh_attribute(stem)
        self.owner.add_module(target, module)
        return self.graph.create_node("call_module", target, args, {}, name=name)

    def result_name(self, node: ir.Node) -> str:
        named = [value.name for value in node.outputs if value.name]
        return self.fx_name(named[0] if len(named) == 1 else node.name or node.op_type.lower())

    def bind_outputs(self, node: ir.Node, result: torch.fx.Node, as_tuple: bool) -> None:
        if not as_tuple:
            self.env[node.outputs[0]] = result
            return
        for index, value in enumerate(node.outputs):
            if value.name and self.table.is_used(value):
                self.env[value] = self.graph.create_node(
                    "call_function", operator.getitem, (result, index), {}, name=self.fx_name(value.name))

    def finish(self, outputs: list[ir.Value], as_tuple: bool) -> None:
        results = [self.read(value) for value in outputs]
        self.graph.output(tuple(results) if as_tuple or len(results) != 1 else results[0])
        fusion.fuse_matmul_add(self.graph)
