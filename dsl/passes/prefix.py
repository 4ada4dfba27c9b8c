"""The prefix pass: rename a model's values, nodes and functions apart from names taken elsewhere.

Used by the merge pass (:mod:`dsl.passes.merge`) before two models become one graph, and
usable alone (``onnx.compose.add_prefix`` does the same on protos).  With ``prefix``,
every named value (inputs, initializers, node outputs, subgraph inputs and outputs,
value_info) and every named node of the main graph and of its If/Loop/Scan subgraphs
gets it; without, names are kept and only those found in ``taken_values`` /
``taken_nodes`` (or clashing with a name the model already uses) get a fresh suffix
(``h`` -> ``h_1``).  Since the IR holds :class:`ir.Value` objects, renaming a value
renames every reader, outer-scope captures inside subgraphs included.

Model-local functions are a namespace of their own: a function whose (domain, name,
overload) is that of one in ``taken_functions`` with a different body is renamed (and
so are its call sites, in the main graph, subgraphs and other function bodies); one with
the same body keeps its name (a merge then shares one copy, see :func:`same_function`).
The prefix is not applied to function names, nor to names inside function bodies
(a body is its own scope).

It works in place: the Model (or Function) passed in is the one changed and returned.

>>> PrefixPass("pre_")(model).target.graph.inputs           # doctest: +SKIP
[%pre_x: FLOAT[1, 4]]
>>> PrefixPass(taken_values={"h"})(model).modified          # doctest: +SKIP
True
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter
from typing import Any

from dsl import ir
from dsl.passes.protocol import PassResult, T

__all__ = [
    "PrefixPass", "same_function", "graph_contents", "read_graph_contents", "GraphContents", "graph_values",
    "graph_node_names", "model_functions", "FunctionKey",
]

FunctionKey = tuple[str, str, str]  # (domain, name, overload)

# (A merge renames whole models: the per-value and per-node steps below run as map()s of
# these getters, each a loop in C, instead of a Python loop over hundreds of thousands.)
_NAME = attrgetter("name")
_INITIALIZER = attrgetter("initializer")
_NODE_VALUES = attrgetter("inputs", "outputs")
_GRAPH_HEAD = attrgetter("inputs", "initializers")
_GRAPH_TAIL = attrgetter("outputs", "value_info")
_CALLEE = attrgetter("callee")


class PrefixPass:
    """Give a model's names ``prefix``, or fresh names where they clash with taken ones (in place).

    ``taken_values`` and ``taken_nodes`` are names the result must not use (another
    model's value and node names); ``taken_functions`` are functions whose (domain,
    name, overload) a function with a different body must not reuse.

    >>> PrefixPass("a_", taken_values={"a_x"})(model).target    # doctest: +SKIP
    """

    def __init__(
        self,
        prefix: str | None = None,
        *,
        taken_values: Collection[str] = (),
        taken_nodes: Collection[str] = (),
        taken_functions: Collection[ir.Function] = (),
        contents: GraphContents | None = None,
    ) -> None:
        self.prefix = prefix or ""
        # (only read: a set given is kept as it is, not copied)
        self.taken_values: AbstractSet[str] = taken_values if isinstance(taken_values, (set, frozenset)) else set(taken_values)
        self.taken_nodes: AbstractSet[str] = taken_nodes if isinstance(taken_nodes, (set, frozenset)) else set(taken_nodes)
        self.taken_functions = list(taken_functions)
        # The walk of the last call: renaming changes no structure, so a caller that goes
        # on with the same graph (the merge pass) reads it instead of walking again.  Given,
        # it is the contents of the graph the pass is called on (the caller walked it, or read it).
        self.contents: GraphContents | None = contents

    def __call__(self, target: T) -> PassResult[T]:
        graph = target.graph
        contents = self.contents
        if contents is None or contents.graphs[0] is not graph:
            contents = self.contents = graph_contents(graph)
        modified = _rename_values(graph, contents.values, self.prefix, self.taken_values)
        if modified:
            contents.read_values = None  # (its names are the old ones)
        modified = _rename_nodes(contents.nodes, self.prefix, self.taken_nodes) or modified
        if isinstance(target, ir.Model):
            modified = _rename_functions(target, self.taken_functions, contents.nodes) or modified
        return PassResult(target, modified)


# ----------------------------------------------------------------------------- values


@dataclass(slots=True)
class GraphContents:
    """What one walk over a graph and its subgraphs finds: the passes that rename, wire
    and collect functions read it instead of walking the graph once each."""

    nodes: list[ir.Node]
    graphs: list[ir.Graph]  # the graph itself, then its subgraphs
    # Every named value by name, as the reader of a model just read bound them (see
    # read_graph_contents); None once a name may have changed, or when not known.
    read_values: dict[str, ir.Value] | None = None

    @property
    def values(self) -> list[ir.Value]:
        """Every value defined or read, each once, in a stable order (values named "",
        omitted outputs, may be left out of the reader's)."""
        if self.read_values is not None:
            return list(self.read_values.values())
        # (Values hash by identity; a repeated key keeps its first position; None is an omitted input.)
        found = dict.fromkeys(chain.from_iterable(self._value_lists()))
        found.pop(None, None)
        return list(found)

    @property
    def value_names(self) -> set[str]:
        """The names of :attr:`values` (one pass, no ordered list built)."""
        if self.read_values is not None:
            return set(self.read_values)
        return set(map(_NAME, filter(None, chain.from_iterable(self._value_lists()))))

    def _value_lists(self) -> Iterator[list[Any]]:
        """The lists of values: each graph's inputs and initializers, each node's inputs
        and outputs, each graph's outputs and value_info (in that order)."""
        return chain(
            chain.from_iterable(map(_GRAPH_HEAD, self.graphs)),
            chain.from_iterable(map(_NODE_VALUES, self.nodes)),
            chain.from_iterable(map(_GRAPH_TAIL, self.graphs)),
        )

    @property
    def node_names(self) -> set[str]:
        """The names of the nodes (empty names left out)."""
        names = set(map(_NAME, self.nodes))
        names.discard("")
        return names


def graph_contents(graph: ir.Graph) -> GraphContents:
    """The nodes and graphs of ``graph`` and its subgraphs, found in one walk."""
    if not ir.holds_subgraphs(graph.nodes):  # (no node holds a subgraph: no walk)
        return GraphContents(list(graph.nodes), [graph])
    nodes = [node for node, _ in ir.walk(graph)]
    return GraphContents(nodes, [graph] + [sub for node in nodes if ir.may_hold_subgraphs(node) for sub in ir.subgraphs(node)])


def read_graph_contents(graph: ir.Graph, values: dict[str, ir.Value] | None) -> GraphContents:
    """The contents of ``graph``, given ``values``: every named value of it by name, as the
    reader that just made it bound them (``converter.from_onnx.model_and_values_from_proto``:
    a graph with no subgraph); walked as :func:`graph_contents` where ``values`` is None."""
    if values is None:
        return graph_contents(graph)
    return GraphContents(list(graph.nodes), [graph], values)


def graph_values(graph: ir.Graph) -> list[ir.Value]:
    """Every value defined or read in ``graph`` and its subgraphs, each once, in a stable order."""
    return graph_contents(graph).values


def graph_node_names(graph: ir.Graph) -> set[str]:
    """The names of the nodes of ``graph`` and its subgraphs (empty names left out)."""
    return graph_contents(graph).node_names


def _new_names(names: list[str], prefix: str, taken: AbstractSet[str]) -> list[str]:
    """One name per entry: prefixed, kept where free, else the first free ``name_N``.

    Empty names (omitted optional outputs, unnamed nodes) stay empty.  A fresh name also
    avoids every name the model itself keeps, so ``h`` does not become an existing ``h_1``.
    """
    wanted = [prefix + name if name else "" for name in names] if prefix else list(names)
    # (A merge renames whole models: each step is one pass over the names, and as few of
    # them as can probe a large set, whose every probe is a cache miss.)
    own = set(wanted)
    own.discard("")
    unnamed = wanted.count("")
    if len(own) != len(wanted) - unnamed:
        return _new_names_in_order(wanted, taken)
    # The usual case, the model's names distinct: a name clashes exactly when it is taken
    # (set operations instead of a lookup a name; no union of the two sets built, and no
    # intersection either where none or all of them clash).
    if own.isdisjoint(taken):
        return wanted
    if own <= taken:  # every name clashes (a model merged with a copy of itself)
        # (distinct, as their bases are; unnamed entries stay "", which no set of names holds)
        firsts = [name + "_1" if name else "" for name in wanted] if unnamed else list(
            map(str.__add__, wanted, repeat("_1")))
        if own.isdisjoint(firsts) and taken.isdisjoint(firsts):  # each takes its first choice, name_1
            return firsts
        clashing: Any = [index for index, name in enumerate(wanted) if name] if unnamed else range(len(wanted))
    else:
        clashes = own & taken
        clashing = [index for index, name in enumerate(wanted) if name in clashes]
        firsts = [wanted[index] + "_1" for index in clashing]  # (distinct, as their bases are)
        if own.isdisjoint(firsts) and taken.isdisjoint(firsts):  # each takes its first choice, name_1
            for index, name in zip(clashing, firsts):
                wanted[index] = name
            return wanted
    made: set[str] = set()
    for index in clashing:
        base = wanted[index]
        name, suffix = base + "_1", 1
        while name in own or name in taken or name in made:
            suffix += 1
            name = f"{base}_{suffix}"
        wanted[index] = name
        made.add(name)
    return wanted


def _new_names_in_order(wanted: list[str], taken: AbstractSet[str]) -> list[str]:
    """:func:`_new_names` where the model repeats a name: its first free occurrence keeps it."""
    used = set(taken)
    clashing: list[int] = []
    for index, name in enumerate(wanted):
        if name in used:
            if name:
                clashing.append(index)
        else:
            used.add(name)
    result = list(wanted)
    for index in clashing:
        base, suffix = wanted[index], 1
        while f"{base}_{suffix}" in used:
            suffix += 1
        result[index] = f"{base}_{suffix}"
        used.add(result[index])
    return result


def _rename_values(graph: ir.Graph, values: list[ir.Value], prefix: str, taken: AbstractSet[str]) -> bool:
    if graph.sparse_initializers:
        return _rename_values_and_sparse(graph, values, prefix, taken)
    old_names = list(map(_NAME, values))
    new_names = _new_names(old_names, prefix, taken)
    if new_names == old_names:
        return False
    _set_names(values, new_names)
    for value in filter(_INITIALIZER, values):  # (a tensor carries its name too; most values have none)
        value.initializer.name = value.name  # type: ignore[union-attr]  # (filtered: not None)
    return True


def _set_names(named: list[Any], names: list[str]) -> None:
    """``item.name = name`` for each pair (one loop in C: the deque keeps nothing)."""
    deque(map(setattr, named, repeat("name"), names), maxlen=0)


def _rename_values_and_sparse(graph: ir.Graph, values: list[ir.Value], prefix: str, taken: AbstractSet[str]) -> bool:
    sparse = list(graph.sparse_initializers)
    # Nodes read a sparse initializer through a Value of the same name: the two are renamed
    # together; only a sparse initializer nothing reads gets a name of its own.
    value_names = {v.name for v in values}
    unread = [name for name in sparse if name not in value_names]
    names = _new_names([v.name for v in values] + unread, prefix, taken)
    renamed: dict[str, str] = dict(zip(unread, names[len(values):]))
    modified = False
    for value, name in zip(values, names):
        renamed.setdefault(value.name, name)
        if value.name != name:
            value.name = name
            if value.initializer is not None:
                value.initializer.name = name
            modified = True
    new_sparse = [renamed[name] for name in sparse]
    if new_sparse != sparse:
        graph.sparse_initializers = dict(zip(new_sparse, graph.sparse_initializers.values()))
        for name, tensor in graph.sparse_initializers.items():
            tensor.values.name = name
        modified = True
    return modified


def _rename_nodes(nodes: list[ir.Node], prefix: str, taken: AbstractSet[str]) -> bool:
    old_names = list(map(_NAME, nodes))
    new_names = _new_names(old_names, prefix, taken)
    if new_names == old_names:
        return False
    _set_names(nodes, new_names)
    return True


# -------------------------------------------------------------------------- functions


def _key(function: ir.Function) -> FunctionKey:
    return (function.domain, function.name, function.overload)


def model_functions(model: ir.Model, main_nodes: list[ir.Node] | None = None) -> list[ir.Function]:
    """The model's listed functions and every function its graphs call, each once
    (``main_nodes``: the main graph's nodes and its subgraphs', when already walked)."""
    found: dict[int, ir.Function] = {id(f): f for f in model.functions}
    nodes = [node for node, _ in ir.walk(model.graph)] if main_nodes is None else main_nodes
    called = dict.fromkeys(map(_CALLEE, nodes))  # (each callee once, in the order first called)
    called.pop(None, None)
    for callee in called:
        if id(callee) not in found:
            for inner in callee.callees():  # (callees first, as Function.callees orders them)
                found.setdefault(id(inner), inner)
            found[id(callee)] = callee
    for function in model.functions:
        for callee in function.callees():
            found.setdefault(id(callee), callee)
    return list(found.values())


def _rename_functions(model: ir.Model, taken: list[ir.Function], main_nodes: list[ir.Node]) -> bool:
    by_key = {_key(f): f for f in taken}
    own = model_functions(model, main_nodes)
    used_keys = set(by_key) | {_key(f) for f in own}
    # Decide every rename on the unchanged model: a body's signature includes its callees'.
    renamed: list[tuple[ir.Function, str]] = []
    for function in own:
        other = by_key.get(_key(function))
        if other is None or other is function or same_function(function, other):
            continue
        suffix = 1
        while (function.domain, f"{function.name}_{suffix}", function.overload) in used_keys:
            suffix += 1
        name = f"{function.name}_{suffix}"
        used_keys.add((function.domain, name, function.overload))
        renamed.append((function, name))
    for function, name in renamed:
        function.name = name
    if renamed:
        changed = {id(f) for f, _ in renamed}
        for graph in [model.graph, *(f.graph for f in own)]:
            for node, _ in ir.walk(graph):
                if node.callee is not None and id(node.callee) in changed:
                    node.op_type = node.callee.name
    return bool(renamed)


def same_function(first: ir.Function, second: ir.Function) -> bool:
    """Whether two functions compute the same thing the same way: equal bodies up to value
    names (ops, attributes, constants, attribute parameters, opsets and callees' bodies).

    >>> same_function(model_a.functions[0], model_b.functions[0])   # doctest: +SKIP
    True
    """
    return _function_signature(first) == _function_signature(second)


def _function_signature(function: ir.Function) -> tuple[Any, ...]:
    params = tuple((p.name, int(p.kind), _attr_signature(p.default, {})) for p in function.attr_params)
    return (
        _key(function),
        params,
        tuple(sorted(function.opset_imports.items())),
        _graph_signature(function.graph, {}),
    )


def _graph_signature(graph: ir.Graph, numbers: dict[int, int]) -> tuple[Any, ...]:
    def number(value: ir.Value | None) -> int:
        if value is None:
            return -1
        return numbers.setdefault(id(value), len(numbers))

    inputs = tuple((number(v), v.type) for v in graph.inputs)
    constants = tuple((number(v), _tensor_signature(v.initializer)) for v in graph.initializers)
    nodes = []
    for node in graph.nodes:
        reads = tuple(number(v) for v in node.inputs)
        writes = tuple(number(v) if v.name else -1 for v in node.outputs)
        attrs = tuple(sorted((name, _attr_signature(attr, numbers)) for name, attr in node.attributes.items()))
        callee = _function_signature(node.callee) if node.callee is not None else None
        nodes.append((node.op_type, node.domain, node.overload, reads, writes, attrs, callee))
    outputs = tuple(number(v) for v in graph.outputs)
    return inputs, constants, tuple(nodes), outputs


def _attr_signature(attr: ir.Attr | None, numbers: dict[int, int]) -> Any:
    if attr is None:
        return None
    return (int(attr.kind), attr.ref_attr_name, _payload_signature(attr.value, numbers))


def _payload_signature(value: Any, numbers: dict[int, int]) -> Any:
    if isinstance(value, list):
        return tuple(_payload_signature(item, numbers) for item in value)
    if isinstance(value, ir.Tensor):
        return _tensor_signature(value)
    if isinstance(value, ir.SparseTensor):
        return (_tensor_signature(value.values), _tensor_signature(value.indices), value.dims)
    if isinstance(value, ir.Graph):
        return _graph_signature(value, numbers)
    return value


def _tensor_signature(tensor: ir.Tensor | None) -> Any:
    if tensor is None:
        return None
    array = tensor.array
    data = tuple(array.ravel().tolist()) if array.dtype == object else array.tobytes()
    return (tensor.elem_type, tensor.shape, data)
