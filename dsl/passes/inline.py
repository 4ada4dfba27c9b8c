"""The inline pass: calls of model-local functions replaced by the callee's body.

Used for ``@script(inline=True)`` callees and for ``to_model_proto(inline=True)``, both
run by the facade (:mod:`dsl.script_function`).  The input is not changed: the result
is a copy in which each selected call node is replaced by copies of the callee's nodes,
with fresh value names and the callee's attribute references (``ref_attr_name``)
replaced by the attribute values of the call (or the callee's defaults; a reference to
an attribute that is neither given nor defaulted is dropped, as ONNX specifies).  Calls
inside inlined bodies are inlined too when selected; the bodies of callees that are not
inlined are left alone (for a Function; a Model's own functions are each inlined).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any, Union

from dsl import ir
from dsl.errors import ConversionError, DslError
from dsl.opsets import get_opset
from dsl.passes.protocol import PassResult, T

__all__ = ["NodeCopier", "InlinePass", "inline_calls", "copy_graph", "Selection"]

# Which callees to inline: None (all), a predicate on the callee, or the callees themselves.
Selection = Union[None, Callable[[ir.Function], bool], Collection[ir.Function]]


class InlinePass:
    """Inline the calls of the selected callees in a Function, or in every graph of a Model.

    ``only`` is None (inline every call), a predicate on the callee, or a collection of
    callee Functions.  A Model keeps its functions that were not selected (calls of them
    point at their inlined copies); the selected ones are inlined everywhere and dropped.

    >>> flat = InlinePass()(model_fn.function).target                   # doctest: +SKIP
    >>> some = InlinePass(only=[helper.function])(f.function).target     # doctest: +SKIP
    """

    def __init__(self, only: Selection = None) -> None:
        self.selected = _selector(only)

    def __call__(self, target: T) -> PassResult[T]:
        if isinstance(target, ir.Model):
            return _inline_model(target, self.selected)
        inliner = _Inliner(target, self.selected, {})
        return PassResult(inliner.function(), bool(inliner.inlined))


def inline_calls(function: ir.Function, only: Selection = None) -> ir.Function:
    """A copy of ``function`` with calls of the selected callees inlined (see :class:`InlinePass`).

    >>> flat = inline_calls(model_fn.function)                 # doctest: +SKIP
    >>> some = inline_calls(f.function, only=[helper.function])  # doctest: +SKIP
    """
    return InlinePass(only)(function).target


class NodeCopier:
    """Copies values and nodes (subgraphs included) under their own names, each value once:
    ``mapping`` takes an original Value to its copy, and a copied node reads the copies of
    its inputs.  Calls keep their callees (nothing is inlined).  For passes that keep part
    of a graph (the cut pass): copy the kept inputs and initializers, then the kept nodes
    in order.

    >>> copier = NodeCopier(); x = copier.value(graph.inputs[0])      # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.mapping: dict[Any, Any] = {}
        self._inliner = _Inliner(ir.Function("copy", ir.Graph()), lambda callee: False, {})

    def value(self, value: ir.Value) -> ir.Value:
        found = self.mapping.get(value)
        return found if found is not None else self._inliner.copy_value(value, self.mapping, keep_names=True)

    def node(self, node: ir.Node) -> ir.Node:
        copies: list[ir.Node] = []
        self._inliner.copy_node(node, copies, self.mapping, None, keep_names=True)
        return copies[0]


def copy_graph(graph: ir.Graph) -> ir.Graph:
    """A copy of ``graph`` and its subgraphs: new Values and Nodes with the same names, whose
    calls point at the same callees (nothing is inlined).

    >>> fresh = copy_graph(model.graph)            # doctest: +SKIP
    """
    copier = _Inliner(ir.Function(graph.name, graph), lambda callee: False, {})
    return copier.copy_graph(graph, {}, None, keep_names=True)


def _selector(only: Selection) -> Callable[[ir.Function], bool]:
    if only is None:
        return lambda callee: True
    if callable(only):
        return only
    chosen = {id(f) for f in only}
    return lambda callee: id(callee) in chosen


def _inline_model(model: ir.Model, selected: Callable[[ir.Function], bool]) -> PassResult[ir.Model]:
    main = ir.Function(model.graph.name or "main", model.graph, opset_imports=dict(model.opset_imports))
    copies: dict[int, ir.Function] = {}  # id(function) -> its inlined copy; calls are redirected to it
    modified = False
    for function in _reached(main, model.functions):  # callees before their callers
        if not selected(function):
            inliner = _Inliner(function, selected, copies)
            copies[id(function)] = inliner.function()
            modified = modified or bool(inliner.inlined)
    inliner = _Inliner(main, selected, copies)
    new_main = inliner.function()
    if not (modified or inliner.inlined):
        return PassResult(model, False)
    functions = [copies[id(f)] for f in model.functions if not selected(f)]
    used = _domains_used(new_main.graph) | {f.domain for f in functions}
    for function in functions:
        used |= _domains_used(function.graph)
    imports = {**model.opset_imports, **new_main.opset_imports}
    imports = {d: v for d, v in imports.items() if d == "" or d in used}
    return PassResult(dataclasses.replace(model, graph=new_main.graph, functions=functions, opset_imports=imports), True)


def _reached(main: ir.Function, listed: list[ir.Function]) -> list[ir.Function]:
    """The model's functions and every function its graphs call, each after its callees."""
    seen: set[int] = set()
    order: list[ir.Function] = []
    for root in [*listed, main]:
        for function in [*root.callees(), root]:
            if function is not main and id(function) not in seen:
                seen.add(id(function))
                order.append(function)
    return order


class _Inliner:
    """Copies one function, inlining the selected calls; ``copies`` redirects the calls
    of callees that are not inlined (a Model's functions, copied before their callers)."""

    def __init__(
        self, function: ir.Function, selected: Callable[[ir.Function], bool], copies: dict[int, ir.Function]
    ) -> None:
        self.source = function
        self.selected = selected
        self.copies = copies
        self.inlined: list[ir.Function] = []
        self.owner: dict[int, ir.Function] = {}  # id(node) -> the callee it was inlined from
        self.used: set[str] = {v.name for v in (*function.graph.inputs, *function.graph.initializers)}
        self.used.update(v.name for node, _ in ir.walk(function.graph) for v in node.outputs)
        self.counters: dict[str, int] = {}

    def function(self) -> ir.Function:
        """The inlined copy of the function."""
        function = self.source
        graph = self.copy_graph(function.graph, {}, None, keep_names=True)
        imports = _merged_imports(function, graph, self)
        used = _domains_used(graph)
        return ir.Function(
            function.name,
            graph,
            domain=function.domain,
            attr_params=list(function.attr_params),
            opset_imports={d: v for d, v in imports.items() if d == "" or d in used},
            doc_string=function.doc_string,
            overload=function.overload,
            location=function.location,
        )

    def fresh(self, base: str) -> str:
        base = base or "v"
        if base not in self.used:
            self.used.add(base)
            return base
        suffix = self.counters.get(base, 1)
        while f"{base}_{suffix}" in self.used:
            suffix += 1
        self.counters[base] = suffix + 1
        name = f"{base}_{suffix}"
        self.used.add(name)
        return name

    def copy_value(self, value: ir.Value, mapping: dict[Any, Any], keep_names: bool) -> ir.Value:
        copy = ir.Value(
            value.name if keep_names else self.fresh(value.name),
            type=value.type,
            initializer=value.initializer,
            doc_string=value.doc_string,
            location=value.location,
        )
        mapping[value] = copy
        return copy

    def copy_graph(
        self, graph: ir.Graph, mapping: dict[Any, Any], attr_values: dict[str, ir.Attr] | None, keep_names: bool
    ) -> ir.Graph:
        new = ir.Graph(graph.name, doc_string=graph.doc_string, location=graph.location)
        new.inputs = [self.copy_value(v, mapping, keep_names) for v in graph.inputs]
        # an input that is also an initializer (IR < 4) is one value, copied once
        new.initializers = [mapping[v] if v in mapping else self.copy_value(v, mapping, keep_names)
                            for v in graph.initializers]
        new.sparse_initializers = dict(graph.sparse_initializers)
        for node in graph.nodes:
            self.copy_node(node, new.nodes, mapping, attr_values, keep_names)
        new.outputs = [mapping.get(v, v) for v in graph.outputs]
        new.value_info = [mapping[v] for v in graph.value_info if v in mapping]
        return new

    def copy_attr(
        self, attr: ir.Attr, mapping: dict[Any, Any], attr_values: dict[str, ir.Attr] | None, keep_names: bool
    ) -> ir.Attr | None:
        if attr.ref_attr_name is not None and attr_values is not None:
            return ir.resolve_attribute(attr, attr_values)
        value = attr.value
        if attr.kind == ir.AttrKind.GRAPH and value is not None:
            value = self.copy_graph(value, mapping, attr_values, keep_names)
        elif attr.kind == ir.AttrKind.GRAPHS and value is not None:
            value = [self.copy_graph(g, mapping, attr_values, keep_names) for g in value]
        return ir.Attr(attr.name, attr.kind, value, ref_attr_name=attr.ref_attr_name,
                       doc_string=attr.doc_string, location=attr.location)

    def copy_node(
        self, node: ir.Node, out: list[ir.Node], mapping: dict[Any, Any], attr_values: dict[str, ir.Attr] | None,
        keep_names: bool,
    ) -> None:
        inputs = [None if v is None else mapping.get(v, v) for v in node.inputs]
        attributes: dict[str, ir.Attr] = {}
        for name, attr in node.attributes.items():
            copied = self.copy_attr(attr, mapping, attr_values, keep_names)
            if copied is not None:
                attributes[name] = copied
        callee = node.callee
        if callee is not None and self.selected(callee):
            self.inline(node, callee, inputs, attributes, out, mapping, keep_names)
            return
        if callee is not None:
            callee = self.copies.get(id(callee), callee)
        # (an output a reader listed earlier already took a copy of keeps that copy)
        outputs = [mapping.get(v) or self.copy_value(v, mapping, keep_names) for v in node.outputs]
        copy = ir.Node(node.op_type, node.domain, inputs, outputs, attributes, name=node.name,
                       overload=node.overload, doc_string=node.doc_string, callee=callee, location=node.location,
                       metadata_props=dict(node.metadata_props) if node.metadata_props else None)
        for value in outputs:
            value.producer = copy
        out.append(copy)

    def inline(
        self, node: ir.Node, callee: ir.Function, inputs: list[Any], attributes: dict[str, ir.Attr],
        out: list[ir.Node], mapping: dict[Any, Any], keep_names: bool,
    ) -> None:
        if callee not in self.inlined:
            self.inlined.append(callee)
        bound = ir.bound_attributes(callee, attributes)
        inner: dict[Any, Any] = dict(zip(callee.inputs, inputs))
        first_new = len(out)
        for inner_node in callee.graph.nodes:
            self.copy_node(inner_node, out, inner, bound, keep_names=False)
        for created_node, _ in ir.walk(ir.Graph(nodes=out[first_new:])):  # nested inlines claimed theirs
            self.owner.setdefault(id(created_node), callee)
        created = {v for n in out[first_new:] for v in n.outputs}
        claimed: set[Any] = set()
        for call_output, callee_output in zip(node.outputs, callee.outputs):
            source = inner.get(callee_output, callee_output)
            if source in created and source not in claimed:
                claimed.add(source)
                source.name = call_output.name if keep_names else self.fresh(call_output.name)
                if call_output.type is not None:
                    source.type = call_output.type
                mapping[call_output] = source
                continue
            copy = self.copy_value(call_output, mapping, keep_names)
            identity = ir.Node("Identity", "", [source], [copy], location=node.location)
            copy.producer = identity
            out.append(identity)


def _merged_imports(function: ir.Function, graph: ir.Graph, inliner: _Inliner) -> dict[str, int]:
    """One version per domain for the inlined function.

    Inlined bodies may come from functions compiled against other versions.  A version
    is acceptable when every node means the same under it as under the version it was
    written for (same schema ``since_version``, ONNX's compatibility rule); the caller's
    own version is tried first, then the others from the newest.
    """
    imports = dict(function.opset_imports)
    if not inliner.inlined:
        return imports
    every_node = [node for node, _ in ir.walk(graph)]
    own = [n for n in every_node if id(n) not in inliner.owner]
    groups: dict[str, list[tuple[int, list[ir.Node]]]] = {}
    for callee in inliner.inlined:
        nodes = [n for n in every_node if inliner.owner.get(id(n)) is callee]
        for domain, version in callee.opset_imports.items():
            groups.setdefault(domain, []).append((version, nodes))
    for domain, entries in groups.items():
        kept = imports.get(domain)
        if kept is not None:
            entries = [(kept, own), *entries]
        versions = {version for version, _ in entries}
        if len(versions) == 1:
            imports[domain] = versions.pop()
            continue
        candidates = ([kept] if kept is not None else []) + sorted(versions - {kept}, reverse=True)
        chosen = next(
            (c for c in candidates if all(_same_schemas(nodes, domain, c, v) for v, nodes in entries)), None
        )
        if chosen is None:
            names = ", ".join(sorted({f.name for f in inliner.inlined if domain in f.opset_imports}))
            raise ConversionError(
                f"{function.name} and the inlined {names} use {domain or 'ai.onnx'} versions "
                f"{sorted(versions)}, and some of their ops differ between those versions",
                function.location,
                hint="compile the functions against the same opset (script(opset=...))",
            )
        imports[domain] = chosen
    return imports


def _same_schemas(nodes: list[ir.Node], domain: str, kept: int, other: int) -> bool:
    """Whether every op of ``domain`` among ``nodes`` means the same at both versions."""
    if kept == other:
        return True
    first, second = get_opset(domain, kept), get_opset(domain, other)
    if not first.has_schemas:
        return False
    for node in nodes:
        if node.domain != domain or node.callee is not None:
            continue
        try:
            if first.get_op(node.op_type).since_version != second.get_op(node.op_type).since_version:
                return False
        except DslError:
            return False
    return True


def _domains_used(graph: ir.Graph) -> set[str]:
    return {node.domain for node, _ in ir.walk(graph)}
