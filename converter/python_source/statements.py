"""One Python statement per node: ``y = op.Relu(x)``, ``a, b = op.TopK(x, k, axis=1)``.

Spelling rules (conservative: what the compiler certainly handles):

* an omitted optional input is ``None``; an omitted output in the middle is ``_``;
* ``a + b`` etc. only for the ops whose Python operator the compiler maps to that very
  op whatever the element types (:data:`dsl.operators.PYTHON_BINARY`), with no attributes;
* tensor attributes are ``np.array(...)`` literals (large ones: module-level names read
  from the weights file); element-type attributes (``to=``) are written ``FLOAT`` etc.;
* a graph attribute is a nested ``@graph()`` function defined just before the node that
  uses it, unless the node is an If or Loop written as Python
  (:mod:`converter.python_source.control_flow`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from converter.python_source.control_flow import write_if, write_loop
from converter.python_source.generated_module import GeneratedModule
from converter.python_source.literals import ENUM_NAMES, array_text, float_text, type_text
from converter.python_source.names import Namespace, python_keeps
from dsl import ir
from dsl.errors import ConversionError
from dsl.loop_forms import LoopPlans, plan_loops
from dsl.operators import PYTHON_BINARY as _BINARY
from dsl.operators import PYTHON_UNARY as _UNARY
from dsl.opsets import Opset
from dsl.source_links import LOCATION_KEY, SourceLink, read_link

__all__ = ["BodyWriter", "GRAPH_KINDS", "def_line", "return_annotation"]

# Integer attributes that hold an element type, written FLOAT rather than 1.
_ELEMENT_TYPE_ATTRIBUTES = {("Cast", "to"), ("EyeLike", "dtype"), ("RandomNormal", "dtype"),
                            ("RandomUniform", "dtype"), ("RandomNormalLike", "dtype"),
                            ("RandomUniformLike", "dtype"), ("Multinomial", "dtype"), ("Bernoulli", "dtype")}
GRAPH_KINDS = frozenset((ir.AttrKind.GRAPH, ir.AttrKind.GRAPHS))
# (module constants: enum attribute lookups are slow in the loops below)
_INT, _INTS, _FLOAT, _TENSOR = ir.AttrKind.INT, ir.AttrKind.INTS, ir.AttrKind.FLOAT, ir.AttrKind.TENSOR
_WRAP_AT = 120  # a call longer than this is written one argument a line


class BodyWriter:
    """Writes the body of one top-level function (and its nested @graph functions)."""

    def __init__(self, module: GeneratedModule, opset_imports: dict[str, int], main_version: int | None) -> None:
        self.module = module
        self.names = Namespace(module.globals.taken)
        self.value_names: dict[ir.Value, str] = dict(module.initializer_names)  # (Values hash by identity)
        self.attr_param_names: dict[str, str] = {}
        self.graph_names: dict[int, str] = {}
        self.op_texts: dict[tuple[str, str], str] = {}  # (domain, op_type) -> "op.Relu"
        self.keyword_names: set[str] = set()  # attribute names already checked to be valid keywords
        self.opset_imports = opset_imports
        self.main_version = main_version
        self.lines: list[str] = []
        self.loops: LoopPlans | None = None  # how each Loop is written (planned with the function's graph)
        self.has_subgraphs = True  # False: no node has a graph attribute (known for the main graph)

    def name_of(self, value: ir.Value) -> str:
        name = self.value_names.get(value)
        if name is None:
            if value.producer is None and value.initializer is None and value.name in self.module.sparse_names:
                name = self.module.sparse_names[value.name]
            else:
                name = self.names.fresh(value.name)
            self.value_names[value] = name
        return name

    def new_global(self, wanted: str, fallback: str) -> str:
        """A module-level name that no local of this function (so far or later) uses."""
        name = self.names.fresh(wanted, fallback)
        self.module.globals.taken.add(name)
        return name

    def define(self, value: ir.Value) -> str:
        if not value.name:
            return "_"
        return self.name_of(value)

    def opset(self, domain: str) -> str:
        version = self.opset_imports.get(domain)
        if version is None:
            version = 1
        key = (domain, version)
        alias = self.module.opset_aliases.get(key)
        if alias is None:
            if domain == "":
                wanted = "op" if version == self.main_version else f"op{version}"
                alias = wanted if wanted == "op" else self.new_global(wanted, "op")
            else:
                alias = self.new_global(domain.replace(".", "_"), "domain")
            self.module.opset_aliases[key] = alias
        return alias

    # ------------------------------------------------------------------ statements

    def graph_body(self, graph: ir.Graph, indent: str) -> None:
        if self.loops is None:  # the function's own graph: plan its loops, nested ones included
            self.loops = plan_loops(graph)
        self.nodes(graph.nodes, indent)
        returned = ", ".join(self.name_of(v) for v in graph.outputs)
        self.lines.append(f"{indent}return {returned}")

    def nodes(self, nodes: list[ir.Node], indent: str) -> None:
        """One statement per node (a structured If or Loop: several).

        Models have thousands of nodes and most are one op call with a few plain
        attributes, so what every node needs is looked up once here, not once per node.
        """
        lines = self.lines
        value_names = self.value_names
        known, name_of, fresh = value_names.get, self.name_of, self.names.fresh
        inline_texts, float_texts = self.module.inline_texts, self.module.float_texts
        op_texts, keyword_names = self.op_texts, self.keyword_names
        has_subgraphs = self.has_subgraphs
        last_origin = ""  # the file:line of the last comment written
        for node in nodes:
            if node.metadata_props is not None and LOCATION_KEY in node.metadata_props:
                link = read_link(node.metadata_props)
                if link is not None and f"{link.file}:{link.line}" != last_origin:  # (a line, several nodes: one comment)
                    lines.append(f"{indent}{origin_comment(link)}")
                    last_origin = f"{link.file}:{link.line}"
            if has_subgraphs and self.control_flow(node, indent):
                continue
            outputs = node.outputs
            targets: str | None
            if len(outputs) == 1 and outputs[0].name:  # the usual case
                target = outputs[0]
                targets = known(target)
                if targets is None:
                    if target.producer is None:
                        targets = name_of(target)
                    else:  # (name_of(target), written out)
                        targets = value_names[target] = fresh(target.name)
            else:
                targets = self.targets(node)
            inputs, attrs = node.inputs, node.attributes
            op_type, domain, callee = node.op_type, node.domain, node.callee
            if not attrs and callee is None and domain == "" and len(outputs) == 1 and None not in inputs:
                symbol = _BINARY.get(op_type)
                if symbol is not None and len(inputs) == 2:
                    left, right = inputs
                    # (operands are mostly named already: a lookup, not a call of name_of)
                    left_text = known(left) or name_of(left)  # type: ignore[arg-type]
                    right_text = known(right) or name_of(right)  # type: ignore[arg-type]
                    lines.append(f"{indent}{targets} = {left_text} {symbol} {right_text}")
                    continue
                symbol = _UNARY.get(op_type)
                if symbol is not None and len(inputs) == 1:
                    operand = inputs[0]
                    operand_text = known(operand) or name_of(operand)  # type: ignore[arg-type]
                    lines.append(f"{indent}{targets} = {symbol}{operand_text}")
                    continue
            if callee is not None:
                callable_text = self.callee_name(node)
            else:
                callable_text = op_texts.get((domain, op_type)) or self.op_text(domain, op_type)
            # Inputs are mostly named already: look them all up at once, then name the rest
            # (and write the omitted ones, None, as None).
            arguments: list[str | None] = list(map(known, inputs))  # type: ignore[arg-type]
            if None in arguments:
                for index, argument in enumerate(arguments):
                    if argument is None:
                        value = inputs[index]
                        arguments[index] = "None" if value is None else name_of(value)
            for attr in attrs.values():
                attr_name = attr.name
                value = attr.value
                kind = attr.kind
                if attr_name not in keyword_names:
                    self.check_keyword(attr_name, op_type)
                if attr.ref_attr_name is not None:
                    arguments.append(f"{attr_name}={self.attribute_parameter(attr)}")
                elif kind == _INTS and type(value) is list:
                    arguments.append(f"{attr_name}={value!r}")  # the most frequent case, as attribute() writes it
                elif kind == _TENSOR:  # (ConstantOfShape's value, Constant)
                    cached = inline_texts.get(id(value.array))  # (as tensor() looks it up, without the call)
                    text = cached[1] if cached is not None and cached[0] is value.array else self.tensor(value)
                    arguments.append(f"{attr_name}={text}")
                elif kind == _FLOAT and value in float_texts:  # (epsilon, alpha)
                    arguments.append(f"{attr_name}={float_texts[value]}")  # (what attribute() returns for it)
                elif kind == _INT and not ((op_type, attr_name) in _ELEMENT_TYPE_ATTRIBUTES and domain == ""):
                    arguments.append(f"{attr_name}={value!r}")  # (as attribute() writes a plain INT)
                else:
                    arguments.append(f"{attr_name}={self.attribute(attr, op_type, domain)}")
            line = f"{indent}{targets} = {callable_text}({', '.join(arguments)})"  # type: ignore[arg-type]
            if len(line) > _WRAP_AT and len(arguments) > 1:  # (exporters' long names: one argument a line)
                inner = indent + "    "
                line = f"{indent}{targets} = {callable_text}(\n{inner}" + f",\n{inner}".join(arguments) + f",\n{indent})"  # type: ignore[arg-type]
            lines.append(line)

    def control_flow(self, node: ir.Node, indent: str) -> bool:
        """Write ``node`` as ``if``/``for``/``while`` (True), or else first the ``@graph()``
        functions its graph attributes need (False: the caller writes the node itself).
        True too for a node that a loop written as Python stands for."""
        op_type = node.op_type
        if op_type == "If" and write_if(self, node, indent):
            return True
        loops = self.loops
        assert loops is not None
        if loops.absorbed and node in loops.absorbed:
            return True  # written by the structured loop that uses it
        if op_type == "Loop" and loops.plans and write_loop(self, node, indent):
            return True
        for attr in node.attributes.values():
            if attr.kind in GRAPH_KINDS and attr.ref_attr_name is None:
                self.subgraphs(attr, indent)
        return False

    def callee_name(self, node: ir.Node) -> str:
        name = self.module.function_names.get(id(node.callee))
        if name is None:
            raise ConversionError(f"node {node.op_type} calls a function that is not part of the model")
        return name

    def op_text(self, domain: str, op_type: str) -> str:
        """``op.Relu`` (remembered for the next node of that op)."""
        if not python_keeps(op_type):
            raise ConversionError(
                f"op type {op_type!r} is not a Python identifier (or is a keyword, or a name Python "
                f"normalises to another), so it cannot be written as op.{op_type}"
            )
        if hasattr(Opset, op_type):  # op.describe(...) would call the Opset's method, not an op
            raise ConversionError(
                f"op type {op_type!r} is the name of a method or attribute of dsl.Opset, so op.{op_type} "
                "cannot name it",
                hint="rename the op in the model (and in its custom domain) to write it as Python",
            )
        text = self.op_texts[(domain, op_type)] = f"{self.opset(domain)}.{op_type}"
        return text

    def check_keyword(self, attr_name: str, op_type: str) -> None:
        if not python_keeps(attr_name):
            raise ConversionError(
                f"attribute name {attr_name!r} of {op_type} is not a Python identifier (or is a "
                "keyword, or a name Python normalises to another), so it cannot be a keyword argument"
            )
        self.keyword_names.add(attr_name)

    def targets(self, node: ir.Node) -> str:
        """The left-hand side for a node with several (or unnamed) outputs."""
        outputs = node.outputs
        while outputs and not outputs[-1].name:
            outputs = outputs[:-1]
        if not outputs:
            raise ConversionError(
                f"node {node.op_type} {node.name!r} has no outputs; Python cannot call it for nothing"
            )
        if len(outputs) == 1:  # (its unnamed trailing outputs dropped)
            return self.name_of(outputs[0])
        return ", ".join([self.define(v) for v in outputs])

    def subgraphs(self, attr: ir.Attr, indent: str) -> None:
        """A ``@graph()`` function for each graph of ``attr``, named for the attribute text."""
        graphs = [attr.value] if attr.kind == ir.AttrKind.GRAPH else list(attr.value)
        names = []
        for sub in graphs:
            name = self.names.fresh(sub.name or attr.name, "body")
            names.append(name)
            self.module.uses_graph = True
            self.lines.append(f"{indent}@graph()")
            params = [self.parameter(v) for v in sub.inputs]
            returns = return_annotation(sub.outputs, self.module)
            self.lines.append(def_line(indent, name, params, returns))
            self.graph_body(sub, indent + "    ")
        self.graph_names[id(attr)] = names[0] if attr.kind == ir.AttrKind.GRAPH else "[" + ", ".join(names) + "]"

    def parameter(self, value: ir.Value, default: str | None = None) -> str:
        annotation = type_text(value.type, self.module)
        text = self.name_of(value) + (f": {annotation}" if annotation else "")
        if default is not None:
            text += f" = {default}" if annotation else f"={default}"
        return text

    # ------------------------------------------------------------------ attributes

    def attribute(self, attr: ir.Attr, op_type: str = "", domain: str = "") -> str:
        """The Python literal of an attribute value (``op_type`` decides ``to=FLOAT`` spellings)."""
        if attr.ref_attr_name is not None:
            return self.attribute_parameter(attr)
        value = attr.value
        kind = attr.kind
        # The frequent kinds first, compared with module constants (enum lookups are slow).
        if kind == _INTS:
            return repr(value if type(value) is list else list(value))
        if kind == _INT:
            if (op_type, attr.name) in _ELEMENT_TYPE_ATTRIBUTES and domain == "" and value in ENUM_NAMES:
                self.module.type_names.add(ENUM_NAMES[value])
                return ENUM_NAMES[value]
            return repr(value)
        if kind == _FLOAT:
            return self.float_attribute(value)
        if kind == _TENSOR:
            return self.tensor(value)
        return self.rare_attribute(attr, op_type)

    def attribute_parameter(self, attr: ir.Attr) -> str:
        name = self.attr_param_names.get(attr.ref_attr_name)  # type: ignore[arg-type]
        if name is None:
            raise ConversionError(
                f"attribute {attr.name} refers to {attr.ref_attr_name!r}, which is not a parameter",
                hint="only attributes inside a model-local function may refer to (ref_attr_name) an attribute "
                "parameter of that function; elsewhere the attribute needs a value",
            )
        return name

    def float_attribute(self, value: float) -> str:
        # Models repeat a few values (epsilon, alpha), and numpy's str() is slow.  Only
        # ordinary values are cached: 0.0 == -0.0 have different texts, NaN matches nothing.
        texts = self.module.float_texts
        text = texts.get(value)
        if text is None:
            text = float_text(value, np.float32)
            if value and value == value:
                texts[value] = text
        return text

    def rare_attribute(self, attr: ir.Attr, op_type: str) -> str:
        K = ir.AttrKind
        value, kind = attr.value, attr.kind
        if kind == K.STRING:
            return repr(value)
        if kind == K.FLOATS:
            return "[" + ", ".join(float_text(v, np.float32) for v in value) + "]"
        if kind == K.STRINGS:
            return repr(list(value))
        if kind == K.TENSORS:
            return "[" + ", ".join(self.tensor(t) for t in value) + "]"
        if kind in (K.GRAPH, K.GRAPHS):
            return self.graph_names[id(attr)]
        if kind == K.SPARSE_TENSOR:
            return self.sparse(value)
        if kind == K.SPARSE_TENSORS:
            return "[" + ", ".join(self.sparse(s) for s in value) + "]"
        if kind == K.TYPE_PROTO:
            return self.type_attr(value)
        if kind == K.TYPE_PROTOS:
            return "[" + ", ".join(self.type_attr(t) for t in value) + "]"
        raise ConversionError(f"attribute {attr.name} of {op_type} has kind {kind.name}, which has no Python spelling")

    def type_attr(self, ir_type: Any) -> str:
        text = type_text(ir_type, self.module)
        if not text:
            raise ConversionError(f"type {ir_type!r} has no Python spelling")
        return text

    def tensor(self, tensor: ir.Tensor) -> str:
        array = tensor.array
        module = self.module
        cached = module.inline_texts.get(id(array))
        if cached is not None and cached[0] is array:
            return cached[1]
        if array.size > module.inline_limit and module.weights_file and array.dtype != object:
            name = self.new_global(tensor.name or "constant", "constant")
            module.large_arrays[name] = array
            module.weight_lines.append(f"{name} = weights[{name!r}]")
            return name
        text = array_text(array, module, "")
        module.inline_texts[id(array)] = (array, text)
        return text

    def sparse(self, sparse: ir.SparseTensor) -> str:
        self.module.uses_sparse_tensor = True
        return (f"sparse_tensor({self.tensor(sparse.values)}, {self.tensor(sparse.indices)}, "
                f"{list(sparse.dims)!r})")


def origin_comment(link: SourceLink) -> str:
    """``# from file:line:column: source line``, the comment above a statement whose node
    carries a source link.  The text comes from the model (untrusted): whatever is not
    printable is written escaped, so a comment stays one comment line.

    >>> origin_comment(SourceLink("m.py", 3, 5, "y = op.Relu(x)"))
    '# from m.py:3:5: y = op.Relu(x)'
    """
    text = f"{link.where}: {link.source}" if link.source else link.where
    return "# from " + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def def_line(indent: str, name: str, params: list[str], returns: str) -> str:
    """``def name(params) -> T:`` on one line, or one parameter a line when that is long."""
    one_line_length = len(indent) + len(name) + sum(map(len, params)) + 2 * len(params) + len(returns) + 5
    if one_line_length <= 120 or not params:
        return f"{indent}def {name}({', '.join(params)}){returns}:"
    inner = indent + "    "
    listed = inner + f",\n{inner}".join(params)  # "*" keeps its place too
    return f"{indent}def {name}(\n{listed},\n{indent}){returns}:"


def return_annotation(outputs: list[ir.Value], module: GeneratedModule) -> str:
    texts = [type_text(v.type, module) for v in outputs]
    if not texts or not all(texts):
        return ""
    if len(texts) == 1:
        return f" -> {texts[0]}"
    return f" -> tuple[{', '.join(texts)}]"
