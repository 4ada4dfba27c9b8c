"""Nodes: an ONNX op with schema-checked attributes, its inputs, parameters and outputs.

Inputs and ``<params>`` become the op's inputs in document order (Agrippa's rule);
every other attribute of ``<node>`` is an ONNX attribute, read as the kind the op's
schema declares.  Input counts, required attributes, element types and optional
inputs are checked against the schema, with the tag's location.
"""

from __future__ import annotations

from dsl import ir, types
from dsl.errors import DslError, MarkupError
from dsl.markup import attributes as read
from dsl.markup.document import Attribute, Element
from dsl.markup.state import EDITOR_ATTRIBUTES, FLOAT, CompilerState, Declaration
from dsl.opsets import Op, elem_of_type_str, get_opset, schema_domains

__all__ = ["NodeCompiler"]

_NODE_ATTRS = ("title", "op", "domain")
_INPUT_ATTRS = ("src", "dim", "type")
_OUTPUT_ATTRS = ("name", "dim", "type")


class NodeCompiler(CompilerState):
    """The node rules; ``<params>`` children are compiled by ``self._param``."""

    def _op(self, element: Element) -> Op:
        op_attr = element.attributes["op"]
        op_name = read.read_string(op_attr, self.bindings).strip()
        domain = self._string(element, "domain") if element.get("domain") is not None else ""
        if domain in ("", "ai.onnx"):
            opset = get_opset("", self.opset_version)
        else:
            version = schema_domains().get(domain, 1)
            version = self.domains.setdefault(domain, version)
            opset = get_opset(domain, version)
        try:
            return opset.get_op(op_name)
        except DslError as error:
            raise error.with_location(op_attr.value_location) from None

    def _skips_attribute(self, element: Element, name: str, attribute: Attribute) -> bool:
        """True (after a warning) for editor layout, and under ``lenient`` for any
        attribute the op does not have; False leaves the op to refuse it."""
        if name in EDITOR_ATTRIBUTES or self.lenient:
            self._unknown_attribute(element, name, attribute, _NODE_ATTRS)
            return True
        return False

    def _node(self, element: Element, prefix: str) -> None:
        self._check(
            element, _NODE_ATTRS, ("op",), children=("input", "params", "output"), open_attributes=True
        )
        op = self._op(element)
        title = self._string(element, "title") if element.get("title") is not None else "GenericNode"
        node_name = self._node_name(prefix + title)
        attrs: dict[str, ir.Attr] = {}
        promoted: dict[int, ir.Value] = {}  # input position -> a Constant made from an attribute
        try:
            for name, attribute in element.attributes.items():
                if name in _NODE_ATTRS:
                    continue
                kind = op.attribute_kind(name)
                if kind is None and op.schema is not None and name in op.input_names and name not in EDITOR_ATTRIBUTES:
                    promoted[op.input_names.index(name)] = self._attribute_as_input(op, name, attribute, node_name)
                    continue
                if kind is None and op.schema is not None and self._skips_attribute(element, name, attribute):
                    continue
                if kind is None:
                    op.check_attribute_name(name, attribute.location)
                value = read.read_onnx_attribute(attribute, kind, self.bindings)
                attrs[name] = op.make_attr(name, value, attribute.location)
            inputs: list[ir.Value | None] = []
            output_elements: list[Element] = []
            for child in element.children:
                if child.tag == "input":
                    value = self._input(child, prefix)
                    if value is None:
                        self._check_omissible(op, len(inputs), child)
                    inputs.append(value)
                elif child.tag == "params":
                    inputs.append(self._param(child, prefix))
                else:
                    self._check(child, _OUTPUT_ATTRS, ("name",))
                    output_elements.append(child)
            for index, value in sorted(promoted.items()):
                if index < len(inputs) and inputs[index] is not None:
                    raise MarkupError(f"{op.name}'s input {op.input_names[index]!r} is given twice: as an attribute "
                                      "and as an <input>", element.location, hint="remove one of them")
                inputs += [None] * (index + 1 - len(inputs))
                inputs[index] = value
            try:
                op.check_inputs(len(inputs), element.location)
            except DslError as error:
                error.hint = (
                    f"{op.name} takes ({', '.join(op.input_names)}): one <input> or <params> each, in that order"
                )
                raise
            if not output_elements:
                raise MarkupError(
                    f"node {title!r} has no <output>", element.location, hint='add <output name="..."/>'
                )
            op.check_outputs(len(output_elements), element.location)
            try:
                op.check_required_attributes(attrs, element.location)
            except DslError as error:
                missing = [n for n, a in op.schema.attributes.items() if a.required and n not in attrs]
                error.hint = f'write it on the node tag: <node op="{op.name}" {missing[0]}="..." ...>'
                raise
            input_elems = [None if v is None else self._elem_of(v) for v in inputs]
            op.check_input_types(input_elems, element.location)
            output_elems = op.output_elem_types(input_elems, attrs)
        except DslError as error:
            raise error.with_location(element.location) from None
        node = ir.Node(op.name, op.domain, inputs, [], attrs, name=node_name, location=element.location)
        for index, child in enumerate(output_elements):
            inferred = output_elems[min(index, len(output_elems) - 1)] if output_elems else None
            node.outputs.append(self._output(child, prefix, node, inferred))
        self.nodes.append(node)
        self.node_locations[node_name] = element.location

    def _attribute_as_input(self, op: Op, name: str, attribute: Attribute, node_name: str) -> ir.Value:
        """An attribute that is an input of the op in the project's opset (ReduceSum's
        ``axes`` from opset 13, Dropout's ``ratio`` from 12): a Constant fed to that
        input, as ``op.ReduceSum(x, axes=[0])`` is in Python, with a warning."""
        import numpy as np

        array = np.asarray(read.read_onnx_attribute(attribute, None, self.bindings))
        elem = _input_element_type(op, op.input_names.index(name), array)
        if elem is None or array.dtype.kind not in "biuf":
            raise MarkupError(f"{name!r} is an input of {op.name} in opset {self.opset_version}, and {attribute.text!r} "
                              "is no tensor it takes", attribute.location,
                              hint=f"feed it as an <input> (the inputs of {op.name} are {', '.join(op.input_names)})")
        self.tolerate(f"{name!r} is an input of {op.name} in opset {self.opset_version}, not an attribute; passed as "
                      "that input (a Constant), as in Python", attribute.location,
                      f"feed it as an <input> to silence this (the inputs of {op.name} are "
                      f"{', '.join(op.input_names)})")
        tensor = ir.Tensor(np.ascontiguousarray(array.astype(types.numpy_dtype(elem))), elem, "", "")
        value = ir.Value(self._fresh_name(f"{node_name}_{name}"), ir.TensorType(elem, tensor.array.shape),
                         location=attribute.location)
        constant = ir.Node("Constant", "", [], [value], {"value": ir.Attr("value", ir.AttrKind.TENSOR, tensor)},
                           name=self._node_name(f"{node_name}_{name}"), location=attribute.location)
        value.producer = constant
        self._claim(value)
        self.nodes.append(constant)
        return value

    @staticmethod
    def _check_omissible(op: Op, index: int, element: Element) -> None:
        if op.schema is None:
            return
        import onnx.defs

        formals = op.schema.inputs
        if not formals:
            return
        formal = formals[min(index, len(formals) - 1)]
        if formal.option != onnx.defs.OpSchema.FormalParameterOption.Optional:
            raise MarkupError(
                f"input {index + 1} of {op.name} ({formal.name}) is required, but src=\"\" omits it",
                element.attributes["src"].value_location,
                hint="only optional inputs may be left out with an empty src",
            )

    def _input(self, element: Element, prefix: str) -> ir.Value | None:
        self._check(element, _INPUT_ATTRS, ("src",))
        src_attr = element.attributes["src"]
        name = read.read_string(src_attr, self.bindings).strip()
        if not name:
            return None  # an omitted optional input
        value = self._lookup(prefix + name, src_attr)
        self._declare_io(element, value, "input")
        return value

    def _output(self, element: Element, prefix: str, node: ir.Node, inferred: int | None) -> ir.Value:
        name_attr = element.attributes["name"]
        full = prefix + self._name(element, "name")
        elem = inferred
        type_attr = element.get("type")
        if type_attr is not None:
            declared = read.read_element_type(type_attr, self.bindings, FLOAT)
            if inferred is not None and declared != inferred:
                raise MarkupError(
                    f"{node.op_type} gives {types.element_type_name(inferred)} here, but type says "
                    f"{types.element_type_name(declared)}",
                    type_attr.value_location,
                    hint="fix the type, or insert a Cast node",
                )
            elem = declared
        value = ir.Value(
            self._fresh_name(full),
            ir.TensorType(elem, None) if elem is not None else None,
            producer=node,
            location=element.location,
        )
        self._claim(value)
        self._define(full, value, (id(element), prefix), name_attr.value_location)
        dim = element.get("dim")
        if dim is not None:
            self.declarations.append(Declaration(value, read.read_dims(dim, self.bindings), dim.value_location, "output"))
        return value


def _input_element_type(op: Op, index: int, array: object) -> int | None:
    """The element type a value read from markup takes as the op's input ``index``:
    int64 for whole numbers, bool for booleans, float32 (else the first float type) for
    the rest, among the types the input allows."""
    import numpy as np

    assert op.schema is not None
    formal = op.schema.inputs[min(index, len(op.schema.inputs) - 1)]
    allowed = next((list(c.allowed_type_strs) for c in op.schema.type_constraints
                    if c.type_param_str == formal.type_str), [formal.type_str])
    kind = np.asarray(array).dtype.kind
    wanted = {"b": ["tensor(bool)"], "i": ["tensor(int64)", "tensor(float)"], "u": ["tensor(int64)", "tensor(float)"],
              "f": ["tensor(float)", "tensor(double)", "tensor(float16)"]}.get(kind, [])
    return next((elem_of_type_str(text) for text in wanted if text in allowed), None)
