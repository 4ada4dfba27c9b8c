"""Inlining: replace calls of model-local functions by the callee's body (a pass over IR).

Used for ``@script(inline=True)`` callees (by the front end) and for
``to_model_proto(inline=True)`` (by the back end).  The input function is not changed:
the result is a copy in which each selected call node is replaced by copies of the
callee's nodes, with fresh value names and the callee's attribute references
(``ref_attr_name``) replaced by the attribute values of the call (or the callee's
defaults; a reference to an attribute that is neither given nor defaulted is dropped,
as ONNX specifies).  Calls inside inlined bodies are inlined too when selected.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Union

from dsl import ir
from dsl.errors import ConversionError

__all__ = ["inline_calls"]

Selection = Union[None, Callable[[ir.Function], bool], Collection[ir.Function]]


def inline_calls(function: ir.Function, only: Selection = None) -> ir.Function:
    """A copy of ``function`` with calls of the selected callees inlined.

    ``only`` is None (inline every call), a predicate on the callee, or a collection of
    callee Functions.  Example::

        flat = inline_calls(model_fn.function)                 # everything
        some = inline_calls(f.function, only=[helper.function])
    """
    if only is None:
        selected: Callable[[ir.Function], bool] = lambda callee: True  # noqa: E731
    elif callable(only):
        selected = only
    else:
        chosen = {id(f) for f in only}
        selected = lambda callee: id(callee) in chosen  # noqa: E731
    inliner = _Inliner(function, selected)
    graph = inliner.copy_graph(function.graph, {}, None, keep_names=True)
    imports = _merged_imports(function, graph, inliner)
    used = _domains_used(graph)
    opset_imports = {d: v for d, v in imports.items() if d == "" or d in used}
    return ir.Function(
        function.name,
        graph,
        domain=function.domain,
        attr_params=list(function.attr_params),
        opset_imports=opset_imports,
        doc_string=function.doc_string,
        overload=function.overload,
        location=function.location,
    )


class _Inliner:
    def __init__(self, function: ir.Function, selected: Callable[[ir.Function], bool]) -> None:
        self.selected = selected
        self.inlined: list[ir.Function] = []
        self.owner: dict[int, ir.Function] = {}  # id(node) -> the callee it was inlined from
        self.used: set[str] = set()
        self.counters: dict[str, int] = {}
        _collect_names(function.graph, self.used)

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
        new.initializers = [self.copy_value(v, mapping, keep_names) for v in graph.initializers]
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
            bound = attr_values.get(attr.ref_attr_name)
            if bound is None:
                return None
            return ir.Attr(attr.name, bound.kind, bound.value, ref_attr_name=bound.ref_attr_name,
                           doc_string=attr.doc_string, location=attr.location)
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
        outputs = [self.copy_value(v, mapping, keep_names) for v in node.outputs]
        copy = ir.Node(node.op_type, node.domain, inputs, outputs, attributes, name=node.name,
                       overload=node.overload, doc_string=node.doc_string, callee=callee, location=node.location)
        for value in outputs:
            value.producer = copy
        out.append(copy)

    def inline(
        self, node: ir.Node, callee: ir.Function, inputs: list[Any], attributes: dict[str, ir.Attr],
        out: list[ir.Node], mapping: dict[Any, Any], keep_names: bool,
    ) -> None:
        if callee not in self.inlined:
            self.inlined.append(callee)
        bound = dict(attributes)
        for param in callee.attr_params:
            if param.name not in bound and param.default is not None:
                bound[param.name] = param.default
        inner: dict[Any, Any] = {}
        for formal, actual in zip(callee.inputs, inputs):
            inner[formal] = actual
        first_new = len(out)
        for inner_node in callee.graph.nodes:
            self.copy_node(inner_node, out, inner, bound, keep_names=False)
        for created_node in _nodes(out[first_new:]):  # nested inlines already claimed theirs
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


def _collect_names(graph: ir.Graph, found: set[str]) -> None:
    for value in (*graph.inputs, *graph.initializers):
        found.add(value.name)
    for node in graph.nodes:
        for value in node.outputs:
            found.add(value.name)
        for attr in node.attributes.values():
            if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
                _collect_names(attr.value, found)
            elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
                for sub in attr.value:
                    _collect_names(sub, found)


def _merged_imports(function: ir.Function, graph: ir.Graph, inliner: _Inliner) -> dict[str, int]:
    """One version per domain for the inlined function.

    Inlined bodies may come from functions compiled against other versions.  A version
    is acceptable when every node means the same under it as under the version it was
    written for (same schema ``since_version``, ONNX's compatibility rule); the caller's
    own version is tried first, then the others from the newest.
    """
    imports = dict(function.opset_imports)
    every_node = _nodes(graph.nodes)
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
    from dsl.errors import DslError
    from dsl.opsets import get_opset

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


def _nodes(top: list[ir.Node]) -> list[ir.Node]:
    """``top`` and every node of their subgraphs."""
    found: list[ir.Node] = []
    stack = [ir.Graph(nodes=top)]
    while stack:
        current = stack.pop()
        for node in current.nodes:
            found.append(node)
            for attr in node.attributes.values():
                if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
                    stack.append(attr.value)
                elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
                    stack.extend(attr.value)
    return found


def _domains_used(graph: ir.Graph) -> set[str]:
    found: set[str] = set()
    stack = [graph]
    while stack:
        current = stack.pop()
        for node in current.nodes:
            found.add(node.domain)
            for attr in node.attributes.values():
                if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
                    stack.append(attr.value)
                elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
                    stack.extend(attr.value)
    return found
