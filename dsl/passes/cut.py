"""The cut pass: keep only the part of a graph that computes some of its values.

Given the names of the values that become the outputs (or SINGA's ``last_layers=-k``)
and, optionally, the names of the values that become the inputs, the result holds the
nodes those outputs need and nothing else: nodes nothing needs, initializers nothing
reads and model-local functions nothing calls are dropped.  A node whose subgraph (an
If branch, a Loop body) reads a value of the main graph needs that value's producer too.

The rules (each mistake is a :class:`dsl.errors.DslError` naming the values):

* ``outputs`` are names of main-graph values (inputs, initializers, node outputs);
  None keeps the graph's outputs.  An unknown name raises :class:`DslNameError` with
  the close matches.
* ``inputs`` None: the new inputs are the graph inputs the outputs need, in their order.
  ``inputs`` given: they are *all* the inputs (initializers stay available); a graph
  input that is needed but not given, and a given input that nothing needed reads, are
  errors (:class:`ConversionError`).  A given input that a node computes becomes an input
  of that value's type; that node, and what only it needed, is dropped.
* ``last_layers=-k`` (SINGA's sonnx): the layers are the main graph's nodes in
  topological order, Constant nodes left out (sonnx keeps them as weights); ``-1`` keeps
  the graph's outputs, ``-k`` makes the outputs of layer ``-k`` the outputs, dropping the
  ``k - 1`` layers after it (``-2`` drops the last layer).  ``k`` outside ``1..layers``,
  or ``last_layers`` together with ``outputs``, is a :class:`ConversionError`.
* An initializer that IR-3 models also list as a graph input stays both when needed.

The input is not changed: the kept graph is a copy (nodes, values, subgraphs); tensors
and functions are shared with the input.  ``share=True`` skips the copy: the result's
graph is new, but its nodes and values are the input's own (the input's lists are left
as they were).  That is for a caller that read the model only to cut it and drops the
input (``converter.cut``): copying was most of the pass's time.  ``names`` is such a
caller's table of the main graph's values by name, as the reader bound them
(:func:`converter.from_onnx.model_and_values_from_proto`), for a graph nothing changed
since: the pass then looks names up in it rather than going over every node to build
its own, and, every value being the graph's own, finds what is needed in one pass over
the nodes from the last.

>>> part = CutPass(outputs=["r173"])(model).target                     # doctest: +SKIP
>>> head = CutPass(last_layers=-3)(model).target                       # doctest: +SKIP
>>> middle = CutPass(outputs=["y"], inputs=["h"])(model).target        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

from dsl import ir
from dsl.errors import ConversionError, DslNameError
from dsl.passes.inline import NodeCopier
from dsl.passes.protocol import PassResult, T

__all__ = ["CutPass", "cut_model", "layers"]


class CutPass:
    """Keep the sub-graph computing ``outputs`` (or the outputs of layer ``last_layers``)
    from ``inputs``; see the module docstring for the rules and errors.

    >>> CutPass(outputs=["hidden"])(model).target.graph.outputs      # doctest: +SKIP
    [%hidden: FLOAT['N', 16]]
    """

    def __init__(
        self,
        outputs: Sequence[str] | None = None,
        inputs: Sequence[str] | None = None,
        last_layers: int | None = None,
        *,
        share: bool = False,
        names: dict[str, ir.Value] | None = None,
    ) -> None:
        self.outputs = None if outputs is None else list(outputs)
        self.inputs = None if inputs is None else list(inputs)
        self.last_layers = last_layers
        self.share = share
        self.names = names

    def __call__(self, target: T) -> PassResult[T]:
        graph = target.graph
        location = target.location or graph.location
        names = _output_names(graph, self.outputs, self.last_layers, location)
        cutter = _Cutter(graph, location, self.share, self.names)
        new_graph = cutter.cut(names, self.inputs)
        if isinstance(target, ir.Model):
            functions = []
            if target.functions:  # (the walk for calls only where there are functions to keep or drop)
                reached = {id(f) for f in ir.Function(new_graph.name, new_graph).callees()}
                functions = [f for f in target.functions if id(f) in reached]
            return PassResult(dataclasses.replace(target, graph=new_graph, functions=functions), True)
        return PassResult(dataclasses.replace(target, graph=new_graph), True)


def cut_model(
    model: ir.Model,
    outputs: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    last_layers: int | None = None,
    *,
    share: bool = False,
    names: dict[str, ir.Value] | None = None,
) -> ir.Model:
    """A copy of ``model`` cut down to what computes ``outputs`` (see :class:`CutPass`;
    ``share=True``: not a copy, for a caller that drops ``model``; ``names``: the main
    graph's values by name as :func:`converter.from_onnx.model_and_values_from_proto`
    gives them, so that the pass need not build that table again; None: it builds it).

    >>> part = cut_model(model, outputs=["r173"])      # doctest: +SKIP
    """
    return CutPass(outputs, inputs, last_layers, share=share, names=names)(model).target


def layers(graph: ir.Graph) -> list[ir.Node]:
    """The nodes ``last_layers`` counts: the graph's own nodes in order, Constants left out.

    >>> layers(model.graph)[-1].op_type      # doctest: +SKIP
    'Softmax'
    """
    return [node for node in graph.nodes if not (node.op_type == "Constant" and node.domain in ("", "ai.onnx"))]


def _output_names(
    graph: ir.Graph, outputs: list[str] | None, last_layers: int | None, location: Any
) -> list[str]:
    if last_layers is None:
        return outputs if outputs is not None else [v.name for v in graph.outputs]
    if outputs is not None:
        raise ConversionError(
            f"cut takes outputs or last_layers, not both (outputs {outputs}, last_layers {last_layers})",
            location,
            hint="drop one of them",
        )
    counted = layers(graph)
    if isinstance(last_layers, bool) or not isinstance(last_layers, int) or not -len(counted) <= last_layers <= -1:
        raise ConversionError(
            f"last_layers={last_layers!r} is out of range: the graph has {len(counted)} layers, "
            f"so it must be between -{len(counted)} and -1",
            location,
            hint="-1 keeps everything, -2 drops the last layer, -k drops the last k-1 layers",
        )
    if last_layers == -1:
        return [v.name for v in graph.outputs]
    return [v.name for v in counted[last_layers].outputs if v.name]


_OUTPUTS = attrgetter("outputs")
_NAME = attrgetter("name")
_PRODUCER = attrgetter("producer")


def _node_outputs_by_name(graph: ir.Graph) -> dict[str, ir.Value]:
    """The node outputs of ``graph`` by name, the first definition of a name kept."""
    outputs = list(chain.from_iterable(map(_OUTPUTS, graph.nodes)))
    outputs.reverse()  # (loops in C; reversed, so the first definition is the one kept)
    by_name = dict(zip(map(_NAME, outputs), outputs))
    by_name.pop("", None)  # (an omitted output)
    return by_name


def _reader_node_outputs(graph: ir.Graph, names: dict[str, ir.Value]) -> dict[str, ir.Value]:
    """What :func:`_node_outputs_by_name` makes, from the table the reader bound (every
    node output's name once, none of them "", with the graph's inputs, initializers and
    sparse initializers): a copy without the sparse initializers, which no cut looks up
    (their Values are in no list); inputs and initializers the caller binds again."""
    by_name = dict(names)
    for name in graph.sparse_initializers:
        value = by_name.get(name)
        if value is not None and value.producer is None:  # (not a node output: an input or initializer, or sparse)
            del by_name[name]
    return by_name


class _Cutter:
    """Finds the needed nodes of one graph and copies them into a new graph."""

    def __init__(
        self, graph: ir.Graph, location: Any, share: bool = False, names: dict[str, ir.Value] | None = None
    ) -> None:
        self.graph = graph
        self.location = location
        self.share = share
        # name -> value; the first definition wins (an input before an initializer of the same name)
        by_name = _node_outputs_by_name(graph) if names is None else _reader_node_outputs(graph, names)
        by_name.update((value.name, value) for value in reversed((*graph.inputs, *graph.initializers)))
        self.by_name = by_name
        # The graph's nodes, for a walk that must not leave it (nodes hash by identity).  None
        # where the reader's table was given: a graph as the reader made it, whose values are
        # all its inputs, initializers or its nodes' outputs.
        self.own_nodes: set[ir.Node] | None = set(graph.nodes) if names is None else None
        self.initializers = {id(value) for value in graph.initializers}
        # The kept nodes that may hold subgraphs, once :meth:`needed` ran (none where none does)
        self.holders: list[ir.Node] = []
        # What the kept nodes compute, where :meth:`sweep` found them (it has the set at hand)
        self.produced: set[ir.Value] | None = None

    def lookup(self, names: Sequence[str], role: str) -> list[ir.Value]:
        unknown = [name for name in names if name not in self.by_name]
        if unknown:
            parts = []
            for name in unknown:
                close = difflib.get_close_matches(name, list(self.by_name), n=3)
                parts.append(f"{name!r}" + (f" (did you mean {', '.join(map(repr, close))}?)" if close else ""))
            raise DslNameError(
                f"cut: no value named {', '.join(parts)} in the graph ({role})",
                self.location,
                hint="name values of the main graph: its inputs, initializers or node outputs",
            )
        return [self.by_name[name] for name in names]

    def cut(self, output_names: list[str], input_names: list[str] | None) -> ir.Graph:
        outputs = self.lookup(output_names, "asked for as output")
        given = self.lookup(input_names, "asked for as input") if input_names is not None else None
        given_ids = {id(v) for v in given} if given is not None else set()
        needed, kept_nodes = self.needed(outputs, set(given or ()))
        if given is not None:
            self.check_inputs(outputs, given, needed, kept_nodes)
            new_inputs = list(given)
            new_inputs += [v for v in self.graph.inputs if id(v) in self.initializers and v in needed
                           and id(v) not in given_ids]
        else:
            new_inputs = [v for v in self.graph.inputs if v in needed]
        untyped = [v.name for v in new_inputs if v.type is None]
        if untyped:
            raise ConversionError(
                f"cut: the new input(s) {', '.join(map(repr, untyped))} have no known type",
                self.location,
                hint="run onnx.shape_inference.infer_shapes on the model first, or add value_info for them",
            )
        if self.share and all(v.producer is None for v in new_inputs):
            return self.keep(new_inputs, outputs, needed, kept_nodes)
        return self.copy(new_inputs, outputs, needed, kept_nodes)  # (a given input a node computes: a new Value)

    def needed(self, outputs: list[ir.Value], given: set[ir.Value]) -> tuple[set[ir.Value], list[ir.Node]]:
        """The main-graph values and nodes the outputs need, stopping at given inputs."""
        # (values and nodes hash by identity; None, an omitted input, counts as needed from the start)
        if self.own_nodes is None and not given:
            swept = self.sweep(outputs)
            if swept is not None:
                return swept
        needed: set[ir.Value | None] = {None}
        kept: set[ir.Node] = set()
        holders: list[ir.Node] = []
        self.walk(list(outputs), needed, kept, given, holders)
        # What subgraphs read of this graph is needed too: walked from once the walk over
        # node inputs ends (the sets reached are the same in any order), and asked of the
        # kept nodes with attributes only, in C (most hold no If/Loop/Scan).
        looked = 0
        while looked < len(holders):
            batch = holders[looked:]
            looked = len(holders)
            if ir.holds_subgraphs(batch):
                self.walk([v for node in batch for v in self.outer_reads(node)], needed, kept, given, holders)
        self.holders = holders if ir.holds_subgraphs(holders) else []
        needed.discard(None)
        return needed, list(filter(kept.__contains__, self.graph.nodes))  # type: ignore[return-value]

    def sweep(self, outputs: list[ir.Value]) -> tuple[set[ir.Value], list[ir.Node]] | None:
        """What :meth:`needed` finds, in one pass over the nodes from the last: a node is
        needed where one of its outputs is.  That holds where every needed value is
        computed by a node listed before the nodes reading it (a sorted graph, ONNX's
        rule); where one is not, or a kept node holds a subgraph, None (the walk then
        finds what is needed).  Only for a graph as the reader made it (a value is an
        output of the node it names as its producer), and no given inputs."""
        needed: set[ir.Value | None] = set(outputs)
        kept: list[ir.Node] = []
        isdisjoint, update, keep = needed.isdisjoint, needed.update, kept.append
        for node in reversed(self.graph.nodes):
            if isdisjoint(node.outputs):
                continue
            keep(node)
            update(node.inputs)
            # (ir.may_hold_subgraphs, inlined: what a subgraph reads of this graph, the walk follows)
            if node.unread_attributes is None and node.attributes and ir.holds_subgraphs([node]):
                return None
        needed.discard(None)
        produced = set(chain.from_iterable(map(_OUTPUTS, kept)))
        # (what no kept node computes must be an input or initializer: else a node listed
        # after one reading it computes it)
        if any(map(_PRODUCER, needed.difference(produced))):
            return None
        kept.reverse()
        self.produced = produced  # (no kept node holds a subgraph: self.holders stays empty)
        return needed, kept  # type: ignore[return-value]

    def walk(
        self, stack: list[ir.Value | None], needed: set[ir.Value | None], kept: set[ir.Node], given: set[ir.Value],
        holders: list[ir.Node],
    ) -> None:
        """Add to ``needed`` and ``kept`` what the values on ``stack`` need through node
        inputs, stopping at given inputs; kept nodes that may hold subgraphs go to ``holders``."""
        own_nodes = self.own_nodes
        checked = bool(given) or own_nodes is not None  # (the plain cut of a graph read: neither to ask)
        pop, add, keep, hold = stack.pop, needed.add, kept.add, holders.append
        while stack:
            value = pop()
            if value in needed:
                continue
            add(value)
            node = value.producer  # type: ignore[union-attr]  # (None is in needed)
            if node is None or node in kept:
                continue
            if checked and (value in given or (own_nodes is not None and node not in own_nodes)):
                continue
            keep(node)
            stack += node.inputs
            if node.unread_attributes is None and node.attributes:  # (ir.may_hold_subgraphs, inlined)
                hold(node)

    def outer_reads(self, node: ir.Node) -> list[ir.Value]:
        """What ``node``'s subgraphs read of the main graph."""
        bodies = list(ir.subgraphs(node))
        if not bodies:
            return []
        return [v for v in ir.outer_values(bodies) if self.by_name.get(v.name) is v]

    def check_inputs(
        self, outputs: list[ir.Value], given: list[ir.Value], needed: set[ir.Value], kept: list[ir.Node]
    ) -> None:
        wanted = ", ".join(repr(v.name) for v in outputs)
        missing = [v.name for v in self.graph.inputs
                   if v in needed and id(v) not in self.initializers and v not in given]
        if missing:
            raise ConversionError(
                f"cut: the outputs {wanted} need the input(s) {', '.join(map(repr, missing))}, which are not given",
                self.location,
                hint="add them to the inputs, or cut at values computed from the given inputs",
            )
        unused = [v.name for v in given if v not in needed]
        if unused:
            raise ConversionError(
                f"cut: the given input(s) {', '.join(map(repr, unused))} are not needed to compute {wanted}",
                self.location,
                hint="leave them out of the inputs",
            )
        produced = {v for node in kept for v in node.outputs}
        clash = [v.name for v in given if v in produced]
        if clash:
            raise ConversionError(
                f"cut: the given input(s) {', '.join(map(repr, clash))} are computed by a node that "
                f"{wanted} also need for another of its outputs",
                self.location,
                hint="give that node's other outputs as inputs too",
            )

    def copy(
        self, inputs: list[ir.Value], outputs: list[ir.Value], needed: set[ir.Value], kept: list[ir.Node]
    ) -> ir.Graph:
        copier = NodeCopier()
        old = self.graph
        new = ir.Graph(old.name, doc_string=old.doc_string, location=old.location)
        new.inputs = [copier.value(v) for v in inputs]
        new.initializers = [copier.value(v) for v in old.initializers if v in needed]
        needed_names = {v.name for v in needed}  # (a sparse initializer's Value is in no list)
        new.sparse_initializers = {n: s for n, s in old.sparse_initializers.items() if n in needed_names}
        for node in kept:  # first, so a node listed before the one computing its input reads the copy
            for value in node.outputs:
                copier.value(value)
        new.nodes = [copier.node(node) for node in kept]
        new.outputs = [copier.value(v) for v in outputs]
        new.value_info = [copier.mapping[v] for v in old.value_info if v in copier.mapping]
        return new

    def keep(
        self, inputs: list[ir.Value], outputs: list[ir.Value], needed: set[ir.Value], kept: list[ir.Node]
    ) -> ir.Graph:
        """What :meth:`copy` makes, holding the input's own nodes and values."""
        old = self.graph
        new = ir.Graph(old.name, doc_string=old.doc_string, location=old.location)
        new.inputs = list(inputs)
        new.initializers = [v for v in old.initializers if v in needed]
        needed_names = set(map(_NAME, needed)) if old.sparse_initializers else set()  # (a sparse one's Value is in no list)
        new.sparse_initializers = {n: s for n, s in old.sparse_initializers.items() if n in needed_names}
        new.nodes = kept
        new.outputs = list(outputs)
        if old.value_info:
            # The values a copy would have made: inputs, initializers, what kept nodes
            # define, in their subgraphs too.
            defined = self.produced
            if defined is None:
                defined = set(chain.from_iterable(map(_OUTPUTS, kept)))
            defined.update(inputs, new.initializers, outputs)
            for node in self.holders:
                for sub in ir.subgraphs(node):
                    for inner in (sub, *(s for n, _ in ir.walk(sub) for s in ir.subgraphs(n))):
                        defined.update(inner.inputs)
                        defined.update(inner.initializers)
                    defined.update(v for n, _ in ir.walk(sub) for v in n.outputs)
            new.value_info = list(filter(defined.__contains__, old.value_info))
        return new
