"""Markup element tree -> :class:`dsl.ir.Model`: the model's imports, blocks and exports.

:class:`MarkupCompiler` joins the rules for blocks (:mod:`dsl.markup.blocks`), nodes
(:mod:`dsl.markup.nodes`) and parameters (:mod:`dsl.markup.params`) over one shared
state (:mod:`dsl.markup.state`).  Every IR object keeps the :class:`SourceLocation` of
the tag it came from.
"""

from __future__ import annotations

from pathlib import Path

from dsl import ir
from dsl.errors import MarkupError
from dsl.markup import attributes as read
from dsl.markup.blocks import BlockCompiler
from dsl.markup.document import Element
from dsl.markup.nodes import NodeCompiler
from dsl.markup.params import ParamCompiler
from dsl.markup.state import DEFAULT_OPSET, FLOAT, IO_ATTRS, CompiledMarkup, Context, Declaration
from dsl.opsets import schema_domains

__all__ = ["CompiledMarkup", "Declaration", "MarkupCompiler", "DEFAULT_OPSET"]

_ROOT_ATTRS = ("script-version", "opset")


class MarkupCompiler(BlockCompiler, NodeCompiler, ParamCompiler):
    """Compiles one architecture file (and the files it imports) into an IR model.

    >>> import numpy as np
    >>> compiler = MarkupCompiler(bindings={}, stored_weights={}, reinit=False, rng=np.random.default_rng(0))
    >>> compiled = compiler.compile(Path("model.agr"), graph_name="g", producer="me")   # doctest: +SKIP
    """

    # ------------------------------------------------------------------ entry point

    def compile(self, architecture: Path, *, graph_name: str, producer: str) -> CompiledMarkup:
        """Compile the architecture file at ``architecture`` into a :class:`CompiledMarkup`."""
        architecture = architecture.resolve()
        root = self._document(architecture)
        self._check_root(root, main=True)
        version_attr = root.get("opset")
        if version_attr is not None:
            self.opset_version = read.read_int(version_attr, self.bindings, "opset", minimum=1)
            newest = schema_domains()[""]
            if self.opset_version > newest:
                raise MarkupError(
                    f"the installed onnx knows opsets up to {newest}, not {self.opset_version}",
                    version_attr.value_location,
                )
        context = Context(architecture.parent, (architecture,), architecture.parent)
        graph_inputs: list[ir.Value] = []
        for child in root.children:
            if child.tag == "import":
                graph_inputs.append(self._graph_input(child))
        for child in root.children:
            if child.tag == "block":
                self._block(child, "", context)
        graph_outputs = [self._graph_output(child) for child in root.children if child.tag == "export"]
        if not graph_outputs:
            raise MarkupError(
                "the model has no <export>, so it would compute nothing",
                root.location,
                hint='name the model outputs: <export from="y" dim="[...]" type="float32"/>',
            )
        graph = ir.Graph(
            name=graph_name,
            inputs=graph_inputs,
            outputs=graph_outputs,
            nodes=self.nodes,
            initializers=self.initializers,
            location=root.location,
        )
        imports = {"": self.opset_version, **self.domains}
        model = ir.Model(graph=graph, opset_imports=imports, producer_name=producer, location=root.location)
        return CompiledMarkup(
            model=model,
            weights=self.weights,
            frozen=self.frozen,
            declarations=self.declarations,
            node_locations=self.node_locations,
            fresh_weights=self.fresh,
        )

    def _check_root(self, root: Element, main: bool) -> None:
        if root.tag != "model":
            raise MarkupError(
                f"the root tag is <{root.tag}>, not <model>",
                root.location,
                hint='wrap the architecture in <model script-version="0.0.1">',
            )
        self._check(root, _ROOT_ATTRS, children=("import", "export", "block"))
        for child in root.children:
            if child.tag == "import":
                self._check(child, IO_ATTRS, ("from", "dim") if main else ("from",))
            elif child.tag == "export":
                self._check(child, IO_ATTRS, ("from",))

    # ------------------------------------------------------------------ model inputs and outputs

    def _graph_input(self, element: Element) -> ir.Value:
        name = self._name(element, "from")
        elem = read.read_element_type(element.get("type"), self.bindings, FLOAT)
        dims = read.read_dims(element.attributes["dim"], self.bindings)
        if name in self.used_names:
            raise MarkupError(f"two model imports are named {name!r}", element.attributes["from"].value_location)
        value = ir.Value(name, ir.TensorType(elem, dims), location=element.location)
        self._claim(value)
        self._define(name, value, (id(element), ""), element.location)
        return value

    def _graph_output(self, element: Element) -> ir.Value:
        from_attr = element.attributes["from"]
        name = self._name(element, "from")
        value = self._lookup(name, from_attr)
        self._check_declared_type(element, value)
        if self._elem_of(value) is None:  # an op without a schema: the export's type, float32 by default
            value.type = ir.TensorType(FLOAT, None)
        dims = None
        if element.get("dim") is not None:
            dims = read.read_dims(element.attributes["dim"], self.bindings)
            self.declarations.append(Declaration(value, dims, element.attributes["dim"].value_location, "export"))
        elem = self._elem_of(value)
        if elem is not None:
            value.type = ir.TensorType(elem, dims)
        if value.name != name and value.producer is not None:
            # Agrippa named a repeated block's output after its last copy ("y$4"); the
            # model output is named as written, so the copy holding that name gives it up.
            holder = self.used_names.get(name)
            if holder is None or holder.producer is not None:
                old_name = value.name
                if holder is not None and holder.location is not value.location:
                    holder.name = self._fresh_name(name)  # not a copy of the same output: a name of its own
                    self._claim(holder)
                    holder = None
                value.name = name
                self._claim(value)
                if holder is not None:  # an earlier copy of the same output takes the last copy's name
                    holder.name = old_name
                    self._claim(holder)
                else:
                    del self.used_names[old_name]
        return value
