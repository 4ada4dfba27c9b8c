"""Structural equality of two ONNX models, functions or graphs, up to renaming.

Two protos are *isomorphic* when they compute the same thing in the same way: the same
operators with the same attributes wired the same way, the same constants and weights,
the same interface.  Names of values and nodes, doc strings, ``value_info`` and the
order of nodes that do not depend on each other do not matter.

The comparison walks the dataflow graph backwards from the outputs, pairing each value
of the first proto with one of the second (a bijection): a pair of values must both be
the same graph input, equal initializers, or the same output of two nodes that are
equal themselves (op, domain, attributes by value, inputs pairwise).  Subgraphs are
compared where their attribute is, with outer-scope references checked against the
pairing of the enclosing graphs.  Every value is visited once, so the time is linear in
the size of the protos.  Nodes that no output depends on (dead code) are paired from
their sinks, in order of op type.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx

from converter.compare_values import (
    Different,
    Step,
    at_step,
    compare_sparse,
    compare_tensors,
    compare_types,
    render,
    same_floats,
    sparse_key,
    tensor_key,
)
from dsl.errors import DslTypeError

__all__ = ["isomorphic", "assert_isomorphic", "first_difference"]


def isomorphic(first: Any, second: Any, *, check_metadata: bool = False) -> bool:
    """True when two Model/Function/Graph protos are equal up to renaming and node order.

    >>> import onnx
    >>> from converter.compare import isomorphic
    >>> isomorphic(onnx.load("a.onnx"), onnx.load("b.onnx"))   # doctest: +SKIP
    True
    """
    return first_difference(first, second, check_metadata=check_metadata) is None


def assert_isomorphic(first: Any, second: Any, *, check_metadata: bool = False) -> None:
    """Raise ``AssertionError`` describing the first difference unless the protos are isomorphic.

    >>> assert_isomorphic(model, model)            # doctest: +SKIP
    """
    difference = first_difference(first, second, check_metadata=check_metadata)
    if difference is not None:
        raise AssertionError(f"not isomorphic: {difference}")


def first_difference(first: Any, second: Any, *, check_metadata: bool = False) -> str | None:
    """A sentence describing the first difference found, or None when isomorphic.

    ``check_metadata`` also compares model metadata (doc string, producer name,
    metadata_props), the IR version (not lowered), graph and node ``metadata_props`` and ``value_info``
    (see :mod:`converter.compare_metadata`); ``producer_version`` is not compared (a
    writer may stamp its own where the original left it empty).
    """
    if type(first) is not type(second):
        return f"a {type(first).__name__} vs a {type(second).__name__}"
    try:
        if isinstance(first, onnx.ModelProto):
            _Comparison().models(first, second, check_metadata)
        elif isinstance(first, onnx.FunctionProto):
            comparison = _Comparison()
            comparison.function(first, second, f"function {first.domain}::{first.name}")
            comparison.drain()
        elif isinstance(first, onnx.GraphProto):
            comparison = _Comparison()
            comparison.top_graph(first, second)
            comparison.drain()
        else:
            raise DslTypeError(
                f"isomorphic compares ModelProto, FunctionProto or GraphProto, not {type(first).__name__}",
                hint="load files with onnx.load, or pass @script functions' .to_model_proto()",
            )
    except Different as difference:
        return str(difference)
    return None


_INPUT, _INITIALIZER, _SPARSE, _NODE = range(4)


class _NameTable:
    """What each name of one graph (or function body) is, with the enclosing graph's table."""

    __slots__ = ("graph", "initializers", "inputs", "nodes", "parent", "producers", "sparse", "where")

    def __init__(self, graph: Any, parent: _NameTable | None, where: str, *, is_function: bool = False) -> None:
        self.graph = graph
        self.parent = parent
        self.where = where
        self.nodes = list(graph.node)
        self.inputs: dict[str, int] = {}
        if is_function:
            for index, name in enumerate(graph.input):
                self.inputs[name] = index
            self.initializers: dict[str, Any] = {}
            self.sparse: dict[str, Any] = {}
        else:
            for index, value in enumerate(graph.input):
                self.inputs[value.name] = index
            self.initializers = {t.name: t for t in graph.initializer}
            self.sparse = {s.values.name: s for s in graph.sparse_initializer}
        self.producers: dict[str, tuple[int, int]] = {}
        for node_index, node in enumerate(self.nodes):
            for output_index, name in enumerate(node.output):
                if name:
                    self.producers[name] = (node_index, output_index)

    def resolve(self, name: str) -> tuple[_NameTable, int, Any] | None:
        scope: _NameTable | None = self
        while scope is not None:
            found = scope.producers.get(name)
            if found is not None:
                return scope, _NODE, found
            if name in scope.inputs:
                return scope, _INPUT, scope.inputs[name]
            if name in scope.initializers:
                return scope, _INITIALIZER, scope.initializers[name]
            if name in scope.sparse:
                return scope, _SPARSE, scope.sparse[name]
            scope = scope.parent
        return None


class _Comparison:
    """One comparison: the pairing of values and nodes found so far, and the pairs left to visit."""

    def __init__(self) -> None:
        self.scope_pairs: dict[int, _NameTable] = {}  # id(first scope) -> second scope
        self.scopes: list[tuple[_NameTable, _NameTable]] = []
        self.forward: dict[tuple[int, str], tuple[int, str]] = {}
        self.backward: dict[tuple[int, str], tuple[int, str]] = {}
        self.node_pairs: dict[tuple[int, int], tuple[int, int]] = {}
        self.paired_second_nodes: set[tuple[int, int]] = set()
        self.work: list[tuple[_NameTable, str, _NameTable, str, Step]] = []
        # Defaults of model-local functions' attributes, by (domain, name, overload), for
        # each side: a call that leaves out a defaulted attribute means that default.
        self.defaults: tuple[dict[Any, dict[str, Any]], dict[Any, dict[str, Any]]] = ({}, {})

    # ------------------------------------------------------------------ top level

    def models(self, first: onnx.ModelProto, second: onnx.ModelProto, check_metadata: bool) -> None:
        if check_metadata:
            for field_name in ("doc_string", "producer_name"):
                if getattr(first, field_name) != getattr(second, field_name):
                    raise Different(
                        f"model {field_name}: {getattr(first, field_name)!r} vs {getattr(second, field_name)!r}"
                    )
            first_props = {p.key: p.value for p in first.metadata_props}
            second_props = {p.key: p.value for p in second.metadata_props}
            if first_props != second_props:
                raise Different(f"metadata_props: {first_props} vs {second_props}")
        self._opsets(first, second)
        first_functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in first.functions}
        second_functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in second.functions}
        if set(first_functions) != set(second_functions):
            # (key=repr throughout: a corrupt proto's names may be bytes, which do not sort with str)
            only_first = sorted(set(first_functions) - set(second_functions), key=repr)
            only_second = sorted(set(second_functions) - set(first_functions), key=repr)
            raise Different(
                f"model-local functions differ: only in the first {_keys(only_first)}, "
                f"only in the second {_keys(only_second)}"
            )
        self.defaults = (_function_defaults(first), _function_defaults(second))
        self.top_graph(first.graph, second.graph)
        self.drain()
        if check_metadata:
            from converter.compare_metadata import compare_metadata

            compare_metadata(first, second, self)
        for key in sorted(first_functions, key=repr):
            comparison = _Comparison()
            comparison.defaults = self.defaults
            comparison.function(first_functions[key], second_functions[key], f"function {key[0]}::{key[1]}")
            comparison.drain()
            if check_metadata:
                from converter.compare_metadata import compare_scope_metadata

                compare_scope_metadata(comparison)

    def _opsets(self, first: Any, second: Any) -> None:
        used = _used_domains(first) | _used_domains(second)
        first_opsets, second_opsets = _opset_versions(first), _opset_versions(second)
        for domain in sorted(used, key=repr):
            if first_opsets.get(domain) != second_opsets.get(domain):
                raise Different(
                    f"opset of domain {domain or 'ai.onnx'!r}: {first_opsets.get(domain)} vs {second_opsets.get(domain)}"
                )

    def top_graph(self, first: onnx.GraphProto, second: onnx.GraphProto) -> None:
        self._graph_pair(first, second, None, None, "graph", strict_types=True, step=None)

    def function(self, first: onnx.FunctionProto, second: onnx.FunctionProto, where: str) -> None:
        first_defaults = {a.name: a for a in first.attribute_proto}
        second_defaults = {a.name: a for a in second.attribute_proto}
        if set(first.attribute) | set(first_defaults) != set(second.attribute) | set(second_defaults):
            raise Different(
                f"{where}: attribute parameters {sorted([*first.attribute, *first_defaults], key=repr)} vs "
                f"{sorted([*second.attribute, *second_defaults], key=repr)}"
            )
        if set(first_defaults) != set(second_defaults):
            raise Different(
                f"{where}: attributes with defaults {sorted(first_defaults, key=repr)} vs "
                f"{sorted(second_defaults, key=repr)}"
            )
        self._opsets(first, second)
        first_scope = _NameTable(first, None, where, is_function=True)
        second_scope = _NameTable(second, None, where, is_function=True)
        for name, attr in first_defaults.items():
            self._attribute(attr, second_defaults[name], first_scope, second_scope, Step(f"{where} default {name}", None))
        self._register_scopes(first_scope, second_scope)
        if len(first.input) != len(second.input) or len(first.output) != len(second.output):
            raise Different(
                f"{where}: {len(first.input)} inputs and {len(first.output)} outputs vs "
                f"{len(second.input)} inputs and {len(second.output)} outputs"
            )
        for index, (name_a, name_b) in enumerate(zip(first.input, second.input)):
            self._pair_names(first_scope, name_a, second_scope, name_b, Step(f"{where} input {index}", None))
        for index, (name_a, name_b) in enumerate(zip(first.output, second.output)):
            step = Step(f"{where} output {index} ({name_a!r} vs {name_b!r})", None)
            self.work.append((first_scope, name_a, second_scope, name_b, step))

    # --------------------------------------------------------------------- graphs

    def _graph_pair(
        self,
        first: onnx.GraphProto,
        second: onnx.GraphProto,
        first_parent: _NameTable | None,
        second_parent: _NameTable | None,
        where: str,
        *,
        strict_types: bool,
        step: Step | None,
    ) -> None:
        if len(first.input) != len(second.input):
            raise Different(f"{where}: {len(first.input)} inputs vs {len(second.input)} {at_step(step)}")
        if len(first.output) != len(second.output):
            raise Different(f"{where}: {len(first.output)} outputs vs {len(second.output)} {at_step(step)}")
        first_scope = _NameTable(first, first_parent, where)
        second_scope = _NameTable(second, second_parent, where)
        self._register_scopes(first_scope, second_scope)
        first_inits = set(first_scope.initializers)
        second_inits = set(second_scope.initializers)
        for index, (value_a, value_b) in enumerate(zip(first.input, second.input)):
            label = f"{where} input {index} ({value_a.name!r} vs {value_b.name!r})"
            compare_types(value_a.type, value_b.type, label, strict_types, step)
            if (value_a.name in first_inits) != (value_b.name in second_inits):
                raise Different(f"{label}: an initializer in only one of them {at_step(step)}")
            self._pair_names(first_scope, value_a.name, second_scope, value_b.name, Step(label, step))
            if value_a.name in first_inits:
                compare_tensors(
                    first_scope.initializers[value_a.name], second_scope.initializers[value_b.name], label, step
                )
            elif (value_a.name in first_scope.sparse) != (value_b.name in second_scope.sparse):
                raise Different(f"{label}: a sparse initializer in only one of them {at_step(step)}")
            elif value_a.name in first_scope.sparse:
                compare_sparse(first_scope.sparse[value_a.name], second_scope.sparse[value_b.name], label, step)
        for index, (value_a, value_b) in enumerate(zip(first.output, second.output)):
            label = f"{where} output {index} ({value_a.name!r} vs {value_b.name!r})"
            compare_types(value_a.type, value_b.type, label, strict_types, step)
            self.work.append((first_scope, value_a.name, second_scope, value_b.name, Step(label, step)))

    def _register_scopes(self, first: _NameTable, second: _NameTable) -> None:
        self.scope_pairs[id(first)] = second
        self.scopes.append((first, second))

    # ------------------------------------------------------------------ the walk

    def drain(self) -> None:
        checked = 0
        while True:
            while self.work:
                self._visit(*self.work.pop())
            # Dead code: pair what no output reached, from its sinks.
            pushed = False
            while checked < len(self.scopes) and not pushed:
                first, second = self.scopes[checked]
                checked += 1
                # After pairing dead sinks, walk from them first: a dead Loop's body is a new
                # scope whose nodes its outputs reach, and must not be taken for dead code.
                pushed = self._pair_dead_nodes(first, second)
                self._check_initializers(first, second)
            if not pushed:
                return

    def _pair_names(self, scope_a: _NameTable, name_a: str, scope_b: _NameTable, name_b: str, step: Step) -> bool:
        """Record name_a <-> name_b; False when already paired (consistently)."""
        key_a = (id(scope_a), name_a)
        key_b = (id(scope_b), name_b)
        known = self.forward.get(key_a)
        if known is not None:
            if known != key_b:
                raise Different(
                    f"{render(step)}: {name_a!r} of the first corresponds to two different values of the "
                    f"second ({known[1]!r} and {name_b!r})"
                )
            return False
        if key_b in self.backward:
            raise Different(
                f"{render(step)}: two different values of the first ({name_a!r} and "
                f"{self.backward[key_b][1]!r}) correspond to {name_b!r} of the second"
            )
        self.forward[key_a] = key_b
        self.backward[key_b] = key_a
        return True

    def _visit(self, scope_a: _NameTable, name_a: str, scope_b: _NameTable, name_b: str, step: Step) -> None:
        found_a = scope_a.resolve(name_a)
        found_b = scope_b.resolve(name_b)
        if found_a is None or found_b is None:
            missing = name_a if found_a is None else name_b
            raise Different(f"{render(step)}: {missing!r} is not defined")
        owner_a, kind_a, what_a = found_a
        owner_b, kind_b, what_b = found_b
        if self.scope_pairs.get(id(owner_a)) is not owner_b:
            raise Different(f"{render(step)}: the values belong to different graphs ({owner_a.where} vs {owner_b.where})")
        if not self._pair_names(owner_a, name_a, owner_b, name_b, step):
            return
        if kind_a != kind_b:
            raise Different(f"{render(step)}: {_kind_word(kind_a, owner_a, what_a)} vs {_kind_word(kind_b, owner_b, what_b)}")
        if kind_a == _INPUT:
            if what_a != what_b:
                raise Different(f"{render(step)}: graph input {what_a} vs graph input {what_b}")
        elif kind_a == _INITIALIZER:
            compare_tensors(what_a, what_b, "initializer", step)
        elif kind_a == _SPARSE:
            compare_sparse(what_a, what_b, "sparse initializer", step)
        else:
            self._node_pair(owner_a, what_a, owner_b, what_b, step)

    def _node_pair(self, scope_a: _NameTable, where_a: tuple[int, int], scope_b: _NameTable, where_b: tuple[int, int], step: Step) -> None:
        node_index_a, output_a = where_a
        node_index_b, output_b = where_b
        node_a = scope_a.nodes[node_index_a]
        node_b = scope_b.nodes[node_index_b]
        if output_a != output_b:
            raise Different(f"{render(step)}: output {output_a} of {_label(node_a)} vs output {output_b} of {_label(node_b)}")
        key_a = (id(scope_a), node_index_a)
        key_b = (id(scope_b), node_index_b)
        known = self.node_pairs.get(key_a)
        if known is not None:
            if known != key_b:
                raise Different(f"{render(step)}: {_label(node_a)} corresponds to two different nodes")
            return
        if key_b in self.paired_second_nodes:
            raise Different(f"{render(step)}: two nodes of the first correspond to {_label(node_b)} of the second")
        self.node_pairs[key_a] = key_b
        self.paired_second_nodes.add(key_b)
        here = f"{_label(node_a)} vs {_label(node_b)}"
        if (_domain(node_a.domain), node_a.op_type, getattr(node_a, "overload", "")) != (
            _domain(node_b.domain), node_b.op_type, getattr(node_b, "overload", "")
        ):
            raise Different(f"{render(step)}: node {here}")
        node_step = Step(f"node {here}", step)
        # Omitted trailing inputs and outputs ("") mean the same as absent ones.
        inputs_a, inputs_b = _trimmed(node_a.input), _trimmed(node_b.input)
        outputs_a, outputs_b = _trimmed(node_a.output), _trimmed(node_b.output)
        if len(inputs_a) != len(inputs_b):
            raise Different(f"{render(node_step)}: {len(inputs_a)} inputs vs {len(inputs_b)}")
        if len(outputs_a) != len(outputs_b):
            raise Different(f"{render(node_step)}: {len(outputs_a)} outputs vs {len(outputs_b)}")
        for index, (out_a, out_b) in enumerate(zip(outputs_a, outputs_b)):
            if bool(out_a) != bool(out_b):
                raise Different(f"{render(node_step)}: output {index} is omitted in only one of them")
            if out_a:
                self._pair_names(scope_a, out_a, scope_b, out_b, node_step)
        attrs_a = self._attributes_of_call(node_a, 0)
        attrs_b = self._attributes_of_call(node_b, 1)
        if set(attrs_a) != set(attrs_b):
            raise Different(f"{render(node_step)}: attributes {sorted(attrs_a, key=repr)} vs {sorted(attrs_b, key=repr)}")
        for name in sorted(attrs_a, key=repr):
            self._attribute(attrs_a[name], attrs_b[name], scope_a, scope_b, node_step)
        for index, (in_a, in_b) in enumerate(zip(inputs_a, inputs_b)):
            if bool(in_a) != bool(in_b):
                raise Different(f"{render(node_step)}: input {index} is omitted in only one of them")
            if in_a:
                self.work.append((scope_a, in_a, scope_b, in_b, Step(f"input {index} ({in_a!r} vs {in_b!r})", node_step)))

    def _attributes_of_call(self, node: Any, side: int) -> dict[str, Any]:
        attrs = {a.name: a for a in node.attribute}
        defaults = self.defaults[side].get((_domain(node.domain), node.op_type, getattr(node, "overload", "")))
        if defaults:
            for name, default in defaults.items():
                attrs.setdefault(name, default)
        return attrs

    def _attribute(self, attr_a: Any, attr_b: Any, scope_a: _NameTable, scope_b: _NameTable, step: Step) -> None:

        def label() -> str:  # rendered only for a difference: paths can be long
            return f"{render(step)}: attribute {attr_a.name}"

        if attr_a.ref_attr_name != attr_b.ref_attr_name:
            raise Different(f"{label()}: refers to {attr_a.ref_attr_name!r} vs {attr_b.ref_attr_name!r}")
        if attr_a.type != attr_b.type:
            raise Different(f"{label()}: kind {_kind_name(attr_a.type)} vs {_kind_name(attr_b.type)}")
        if attr_a.ref_attr_name:  # both refer to the same function attribute: no value to compare
            return
        value_a = onnx.helper.get_attribute_value(attr_a)
        value_b = onnx.helper.get_attribute_value(attr_b)
        kind = attr_a.type
        A = onnx.AttributeProto
        if kind == A.GRAPH:
            self._subgraph(value_a, value_b, scope_a, scope_b, f"{attr_a.name}", step)
        elif kind == A.GRAPHS:
            if len(value_a) != len(value_b):
                raise Different(f"{label()}: {len(value_a)} graphs vs {len(value_b)}")
            for index, (graph_a, graph_b) in enumerate(zip(value_a, value_b)):
                self._subgraph(graph_a, graph_b, scope_a, scope_b, f"{attr_a.name}[{index}]", step)
        elif kind == A.TENSOR:
            compare_tensors(value_a, value_b, f"attribute {attr_a.name}", step)
        elif kind == A.TENSORS:
            if len(value_a) != len(value_b):
                raise Different(f"{label()}: {len(value_a)} tensors vs {len(value_b)}")
            for tensor_a, tensor_b in zip(value_a, value_b):
                compare_tensors(tensor_a, tensor_b, f"attribute {attr_a.name}", step)
        elif kind == A.SPARSE_TENSOR:
            compare_sparse(value_a, value_b, f"attribute {attr_a.name}", step)
        elif kind == A.SPARSE_TENSORS:
            if len(value_a) != len(value_b):
                raise Different(f"{label()}: {len(value_a)} sparse tensors vs {len(value_b)}")
            for sparse_a, sparse_b in zip(value_a, value_b):
                compare_sparse(sparse_a, sparse_b, f"attribute {attr_a.name}", step)
        elif kind in (A.FLOAT, A.FLOATS):
            if not same_floats(value_a, value_b):
                raise Different(f"{label()}: {value_a!r} vs {value_b!r}")
        elif value_a != value_b:
            raise Different(f"{label()}: {_short(value_a)} vs {_short(value_b)}")

    def _subgraph(self, graph_a: Any, graph_b: Any, scope_a: _NameTable, scope_b: _NameTable, name: str, step: Step) -> None:
        self._graph_pair(graph_a, graph_b, scope_a, scope_b, f"subgraph {name}", strict_types=False, step=step)

    # ------------------------------------------------------------------ dead code

    def _pair_dead_nodes(self, first: _NameTable, second: _NameTable) -> bool:
        unpaired_a = [i for i in range(len(first.nodes)) if (id(first), i) not in self.node_pairs]
        unpaired_b = [i for i in range(len(second.nodes)) if (id(second), i) not in self.paired_second_nodes]
        if len(unpaired_a) != len(unpaired_b):
            raise Different(
                f"{first.where}: {len(unpaired_a)} nodes no output depends on vs {len(unpaired_b)} "
                f"({len(first.nodes)} nodes in all vs {len(second.nodes)})"
            )
        if not unpaired_a:
            return False
        sinks_a = _dead_sinks(first, unpaired_a)
        sinks_b = _dead_sinks(second, unpaired_b)
        if len(sinks_a) != len(sinks_b):
            raise Different(f"{first.where}: {len(sinks_a)} unused nodes vs {len(sinks_b)}")
        for index_a, index_b in zip(sinks_a, sinks_b):
            step = Step(f"{first.where}: unused {_label(first.nodes[index_a])} vs {_label(second.nodes[index_b])}", None)
            self._node_pair(first, (index_a, 0), second, (index_b, 0), step)
        return True

    def _check_initializers(self, first: _NameTable, second: _NameTable) -> None:
        """Initializers nothing reads are compared as a multiset of contents."""
        unused_a = [t for name, t in first.initializers.items() if (id(first), name) not in self.forward]
        unused_b = [t for name, t in second.initializers.items() if (id(second), name) not in self.backward]
        if Counter(map(tensor_key, unused_a)) != Counter(map(tensor_key, unused_b)):
            raise Different(
                f"{first.where}: unused initializers differ ({len(unused_a)} vs {len(unused_b)}: "
                f"{[t.name for t in unused_a][:5]} vs {[t.name for t in unused_b][:5]})"
            )
        sparse_a = [t for name, t in first.sparse.items() if (id(first), name) not in self.forward]
        sparse_b = [t for name, t in second.sparse.items() if (id(second), name) not in self.backward]
        if Counter(map(sparse_key, sparse_a)) != Counter(map(sparse_key, sparse_b)):
            raise Different(
                f"{first.where}: unused sparse initializers differ ({len(sparse_a)} vs {len(sparse_b)}: "
                f"{[t.values.name for t in sparse_a][:5]} vs {[t.values.name for t in sparse_b][:5]})"
            )


# ------------------------------------------------------------------------- helpers


def _dead_sinks(scope: _NameTable, unpaired: list[int]) -> list[int]:
    read: set[str] = set()
    for index in unpaired:
        read.update(scope.nodes[index].input)
    sinks = [i for i in unpaired if not any(o in read for o in scope.nodes[i].output if o)]
    sinks.sort(key=lambda i: (scope.nodes[i].domain, scope.nodes[i].op_type))
    return sinks


def _function_defaults(model: onnx.ModelProto) -> dict[Any, dict[str, Any]]:
    return {
        (_domain(f.domain), f.name, getattr(f, "overload", "")): {a.name: a for a in f.attribute_proto}
        for f in model.functions
        if len(f.attribute_proto)
    }


def _trimmed(names: Any) -> list[str]:
    trimmed = list(names)
    while trimmed and not trimmed[-1]:
        trimmed.pop()
    return trimmed


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _used_domains(proto: Any) -> set[str]:
    graph = proto.graph if isinstance(proto, onnx.ModelProto) else proto
    found: set[str] = set()
    stack = [graph]
    while stack:
        current = stack.pop()
        for node in current.node:
            found.add(_domain(node.domain))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    stack.append(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    stack.extend(attr.graphs)
    if isinstance(proto, onnx.ModelProto):
        local = {f.domain for f in proto.functions}
        found -= local - {""}
    return found


def _keys(keys: list[tuple[str, str, str]]) -> str:
    return "[" + ", ".join(f"{d}::{n}" + (f":{o}" if o else "") for d, n, o in keys) + "]"


def _label(node: Any) -> str:
    op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
    return f"{op} {node.name!r}" if node.name else op


def _kind_word(kind: int, scope: _NameTable, what: Any) -> str:
    if kind == _NODE:
        return f"output {what[1]} of {_label(scope.nodes[what[0]])}"
    return {_INPUT: f"graph input {what}", _INITIALIZER: "an initializer", _SPARSE: "a sparse initializer"}[kind]


def _kind_name(kind: int) -> str:
    return onnx.AttributeProto.AttributeType.Name(kind)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _opset_versions(proto: Any) -> dict[str, int]:
    """Domain -> version; a model of IR version 1 or 2 with no ai.onnx import has version 1
    (imports were introduced by IR version 3, the opset being 1 before)."""
    versions = {_domain(o.domain): o.version for o in proto.opset_import}
    if isinstance(proto, onnx.ModelProto) and 0 < proto.ir_version < 3:
        versions.setdefault("", 1)
    return versions


