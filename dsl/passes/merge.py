"""The merge pass: two models become one, outputs of the first wired into inputs of the second.

``io_map=[(first_output, second_input), ...]`` connects the first model's output
``first_output`` to the second model's input ``second_input``: that input's
:class:`ir.Value` is replaced by the output's everywhere in the second model (node
inputs, outputs, and reads inside If/Loop/Scan subgraphs), and it stops being an input.
An empty ``io_map`` puts the two models side by side.

What the result holds follows ``onnx.compose.merge_models``: the inputs of the first
model, then the second's inputs not in the map; the first model's outputs not in the map,
then every output of the second; initializers, value_info and nodes of both (the
first's first).  Names are kept where they do not clash and renamed where they do (the
second model's, by :class:`~dsl.passes.prefix.PrefixPass`); ``prefix1``/``prefix2``
prefix every value and node name of one model first.  Model-local functions with the
same (domain, name) and the same body are shared, with a different body the second's
is renamed.

Opsets: both models must import the same ai.onnx version (the facade,
``converter.merge``, converts the older model up before reading it; this pass refuses a
mix).  Every other domain (ai.onnx.ml, custom ones) is kept; a domain both import at
different versions takes the higher.  The IR version is the higher; metadata_props of
both are kept (the first's value wins on a shared key), the rest of the metadata is
the first's.

Mistakes raise :class:`~dsl.errors.DslError` subclasses naming the values and their
types: an unknown name (with close matches), a second input mapped twice, an element
type or static shape that differs across a map entry, a model merged with itself.

The pass works in place on both models (the result reuses their graphs' objects).

>>> merged = merge_models(first, second, io_map=[("y", "x")])     # doctest: +SKIP
>>> MergePass(second, [("y", "x")])(first).target                 # doctest: +SKIP
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from itertools import compress
from operator import attrgetter, not_

from dsl import ir
from dsl.errors import ConversionError, DslError, DslNameError, DslTypeError
from dsl.passes.prefix import (
    GraphContents,
    PrefixPass,
    graph_contents,
    model_functions,
    read_graph_contents,
    same_function,
)
from dsl.passes.protocol import PassResult

__all__ = ["MergePass", "merge_models", "split_models", "join_models", "IoMap"]

IoMap = Sequence[tuple[str, str]]
_INPUTS = attrgetter("inputs")


class MergePass:
    """Merge ``second`` after the model the pass is called on (see :func:`merge_models`).

    >>> MergePass(second, io_map=[("y", "x")])(first).target       # doctest: +SKIP
    """

    def __init__(
        self, second: ir.Model, io_map: IoMap = (), *, prefix1: str | None = None, prefix2: str | None = None
    ) -> None:
        self.second = second
        self.io_map = list(io_map)
        self.prefix1 = prefix1
        self.prefix2 = prefix2

    def __call__(self, target: ir.Model) -> PassResult[ir.Model]:
        merged = merge_models(target, self.second, self.io_map, prefix1=self.prefix1, prefix2=self.prefix2)
        return PassResult(merged, True)


def merge_models(
    first: ir.Model,
    second: ir.Model,
    io_map: IoMap = (),
    *,
    prefix1: str | None = None,
    prefix2: str | None = None,
    keep_outputs: Collection[str] = (),
    read_values: tuple[dict[str, ir.Value] | None, dict[str, ir.Value] | None] = (None, None),
) -> ir.Model:
    """One model computing ``first`` and then ``second``, wired by ``io_map`` (in place; see the module).

    ``keep_outputs`` names outputs of the first model that stay outputs of the result
    even though the map consumes them (:func:`split_models` feeds them on to a third model).
    ``read_values``: each model's values by name as its reader made them, where the caller
    has them (``converter.from_onnx.model_and_values_from_proto``; the models unchanged since),
    so that the pass need not walk the graphs to find every value it may rename.

    >>> merged = merge_models(preprocess, classifier, io_map=[("image", "data_0")])   # doctest: +SKIP
    >>> [v.name for v in merged.graph.outputs]                                         # doctest: +SKIP
    ['softmaxout_1']
    """
    if first is second or first.graph is second.graph:
        raise DslError(
            "a model cannot be merged with itself: the map would make a cycle",
            hint="read the model twice (converter.merge does) to chain two copies of it",
        )
    pairs = _resolve(first, second, list(io_map))
    keep = set(keep_outputs)
    kept = {id(v) for v in first.graph.outputs if v.name in keep}
    _check_opsets(first, second)
    first_contents = read_graph_contents(first.graph, read_values[0])
    if prefix1:
        PrefixPass(prefix1, contents=first_contents)(first)
    first_functions = model_functions(first, first_contents.nodes)
    taken_values = first_contents.value_names
    taken_values.update(first.graph.sparse_initializers)
    renamer = PrefixPass(
        prefix2,
        taken_values=taken_values,
        taken_nodes=first_contents.node_names,
        taken_functions=first_functions,
        contents=read_graph_contents(second.graph, read_values[1]),
    )
    renamer(second)
    second_contents = renamer.contents or graph_contents(second.graph)
    _replace_values(second_contents, {input_: output for output, input_ in pairs})
    functions = _merge_functions(first_functions, second, second_contents.nodes)
    return _assemble(first, second, pairs, functions, kept)


def split_models(parent: ir.Model, left: ir.Model, right: ir.Model, left_map: IoMap, right_map: IoMap) -> ir.Model:
    """One model where ``parent``'s outputs feed two children (sclblonnx's ``split``; in place).

    ``left_map``/``right_map`` pair an output of ``parent`` with an input of ``left`` /
    ``right``; an output may feed both.  The result is ``merge_models(parent, left,
    left_map)`` followed by ``right`` merged with ``right_map``: its inputs are the
    parent's, then the children's the maps leave open; its outputs the parent's that
    neither map consumes, then the left's, then the right's.

    >>> both = split_models(backbone, head_a, head_b, [("h", "x")], [("h", "x")])   # doctest: +SKIP
    """
    _check_distinct(parent, left, right)
    _resolve(parent, left, list(left_map))
    _resolve(parent, right, list(right_map))
    shared = {out for out, _ in right_map}
    middle = merge_models(parent, left, left_map, keep_outputs=shared)
    return merge_models(middle, right, right_map)


def join_models(left: ir.Model, right: ir.Model, child: ir.Model, left_map: IoMap, right_map: IoMap) -> ir.Model:
    """One model where the outputs of two parents feed ``child`` (sclblonnx's ``join``; in place).

    ``left_map``/``right_map`` pair an output of ``left`` / ``right`` with an input of
    ``child``.  The parents are put side by side (names of ``right`` that clash are
    renamed, the maps follow), then ``child`` is merged after them with both maps: the
    result's inputs are the left's, the right's, then the child's left open; its outputs
    the parents' that no map consumes, then the child's.

    >>> model = join_models(image_net, text_net, fusion, [("img", "a")], [("txt", "b")])   # doctest: +SKIP
    """
    _check_distinct(left, right, child)
    left_pairs = _resolve(left, child, list(left_map))
    right_pairs = _resolve(right, child, list(right_map))
    both = left_pairs + right_pairs
    fed: dict[int, ir.Value] = {}
    for output, input_ in both:
        _feed_once(fed, output, input_, "the maps feed the child's")
    side = merge_models(left, right)
    # ``right``'s outputs may have been renamed apart from ``left``'s: map by the Value, not the old name.
    io_map = [(output.name, input_.name) for output, input_ in both]
    return merge_models(side, child, io_map)


def _check_distinct(*models: ir.Model) -> None:
    graphs = [id(m.graph) for m in models]
    if len(set(graphs)) != len(graphs):
        raise DslError(
            "the same model is passed twice: each part must be a model of its own",
            hint="read the model once per use (converter.split and converter.join do)",
        )


# ------------------------------------------------------------------------------ checks


def _resolve(first: ir.Model, second: ir.Model, io_map: list[tuple[str, str]]) -> list[tuple[ir.Value, ir.Value]]:
    outputs = {v.name: v for v in first.graph.outputs}
    inputs = {v.name: v for v in second.graph.inputs}
    pairs: list[tuple[ir.Value, ir.Value]] = []
    fed: dict[int, ir.Value] = {}
    for entry in io_map:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            raise DslTypeError(f"io_map entry {entry!r} is not a pair (first_output, second_input)")
        out_name, in_name = entry
        output = _lookup(out_name, outputs, "an output of the first model")
        input_ = _lookup(in_name, inputs, "an input of the second model")
        _feed_once(fed, output, input_, "io_map feeds the second model's")
        _check_types(output, input_)
        pairs.append((output, input_))
    return pairs


def _feed_once(fed: dict[int, ir.Value], output: ir.Value, input_: ir.Value, what: str) -> None:
    """Record that ``output`` feeds ``input_`` (``fed`` maps inputs to what feeds them); a
    second feed of the same input is refused."""
    earlier = fed.get(id(input_))
    if earlier is not None:
        raise DslNameError(
            f"{what} input {input_.name!r} twice (from {earlier.name!r} and {output.name!r})",
            hint="an input takes one value: keep one of the two entries",
        )
    fed[id(input_)] = output


def _lookup(name: str, values: dict[str, ir.Value], what: str) -> ir.Value:
    found = values.get(name)
    if found is None:
        close = difflib.get_close_matches(name, list(values), n=3)
        known = ", ".join(repr(n) for n in values) or "none"
        raise DslNameError(
            f"io_map names {name!r}, which is not {what} (those are: {known})",
            hint=f"did you mean {' or '.join(repr(c) for c in close)}?" if close else "check the spelling",
        )
    return found


def _check_types(output: ir.Value, input_: ir.Value) -> None:
    given, wanted = output.type, input_.type
    if given is None or wanted is None or given is wanted:  # (a reader shares equal types: one object)
        return
    if isinstance(given, ir.TensorType) and isinstance(wanted, ir.TensorType):
        if given.elem_type != wanted.elem_type:
            raise DslTypeError(
                f"{_map_entry(output, input_)}: element types {ir.element_type_name(given.elem_type)} and "
                f"{ir.element_type_name(wanted.elem_type)} differ",
                hint="insert a Cast in one of the models, or map another output",
            )
        if given.shape is None or wanted.shape is None:
            return
        if len(given.shape) != len(wanted.shape) or any(
            isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(given.shape, wanted.shape)
        ):
            raise DslTypeError(
                f"{_map_entry(output, input_)}: shapes {list(given.shape)} and {list(wanted.shape)} differ",
                hint="reshape in one of the models, or map an output of the right shape",
            )
    elif type(given) is not type(wanted):
        raise DslTypeError(f"{_map_entry(output, input_)}: the kinds differ",
                           hint="map an output of the kind the input takes")


def _map_entry(output: ir.Value, input_: ir.Value) -> str:
    """The io_map entry and both types, for an error about them."""
    return (f"io_map ({output.name!r} -> {input_.name!r}): the first model's {output.name!r} is {output.type!r}, "
            f"the second model's input {input_.name!r} is {input_.type!r}")


def _check_opsets(first: ir.Model, second: ir.Model) -> None:
    ours, theirs = _default_version(first), _default_version(second)
    if ours is not None and theirs is not None and ours != theirs:
        raise ConversionError(
            f"the first model imports ai.onnx opset {ours} and the second opset {theirs}",
            hint="convert the older model up first (converter.merge does, with onnx.version_converter)",
        )


def _default_version(model: ir.Model) -> int | None:
    imports = model.opset_imports
    return imports.get("", imports.get("ai.onnx"))


# ------------------------------------------------------------------------------ wiring


def _replace_values(contents: GraphContents, replacements: dict[ir.Value, ir.Value]) -> None:
    """Every read of a value that is a key, in a graph and its subgraphs, reads its replacement."""
    if not replacements:
        return
    replaced = replacements.keys()  # (Values hash by identity; None, an omitted input, is no key)
    nodes = contents.nodes
    # A list is rebuilt only where it holds a replaced value; the few such nodes are found
    # by one loop in C over all of them.
    for node in compress(nodes, map(not_, map(replaced.isdisjoint, map(_INPUTS, nodes)))):
        node.inputs = [None if v is None else replacements.get(v, v) for v in node.inputs]
    for current in contents.graphs:
        current.outputs = [replacements.get(v, v) for v in current.outputs]
        current.value_info = [v for v in current.value_info if v not in replacements]


def _merge_functions(ours: list[ir.Function], second: ir.Model, main_nodes: list[ir.Node]) -> list[ir.Function]:
    """The first's functions (``ours``), then the second's that are not the same as one of
    the first's (calls of a shared one are redirected to the first's copy)."""
    by_key = {(f.domain, f.name, f.overload): f for f in ours}
    theirs = model_functions(second, main_nodes)
    shared: dict[int, ir.Function] = {}
    for function in theirs:
        other = by_key.get((function.domain, function.name, function.overload))
        if other is not None and same_function(function, other):
            shared[id(function)] = other
    if shared:
        for graph in [second.graph, *(f.graph for f in theirs)]:
            for node, _ in ir.walk(graph):
                if node.callee is not None and id(node.callee) in shared:
                    node.callee = shared[id(node.callee)]
    return ours + [f for f in theirs if id(f) not in shared]


def _assemble(
    first: ir.Model,
    second: ir.Model,
    pairs: list[tuple[ir.Value, ir.Value]],
    functions: list[ir.Function],
    kept: set[int],
) -> ir.Model:
    one, two = first.graph, second.graph
    replaced = {id(input_) for _, input_ in pairs}
    consumed = {id(output) for output, _ in pairs} - kept
    graph = ir.Graph(
        name=one.name or two.name,
        inputs=one.inputs + _without(two.inputs, replaced),
        outputs=_without(one.outputs, consumed) + two.outputs,
        nodes=one.nodes + two.nodes,
        initializers=one.initializers + _without(two.initializers, replaced),
        sparse_initializers={**one.sparse_initializers, **two.sparse_initializers},
        value_info=one.value_info + _without(two.value_info, replaced),
        doc_string=one.doc_string or two.doc_string,
        location=one.location,
    )
    imports = dict(second.opset_imports)
    for domain, version in first.opset_imports.items():
        imports[domain] = max(version, imports.get(domain, version))
    versions = [v for v in (first.ir_version, second.ir_version) if v]
    return ir.Model(
        graph=graph,
        functions=functions,
        opset_imports=imports,
        ir_version=max(versions) if versions else None,
        producer_name=first.producer_name,
        producer_version=first.producer_version,
        domain=first.domain,
        model_version=first.model_version,
        doc_string=first.doc_string,
        metadata_props={**second.metadata_props, **first.metadata_props},
        location=first.location,
    )


def _without(values: list[ir.Value], left_out: set[int]) -> list[ir.Value]:
    """``values`` but those whose id is in ``left_out`` (``values`` itself where none is: the
    caller concatenates, which copies)."""
    return [v for v in values if id(v) not in left_out] if left_out else values
