"""Ranks of a model's outputs that ONNX shape inference leaves open, settled from what
the model's static shapes decide.

onnx.checker wants every graph output to have a shape (a rank), onnxruntime does not.
ONNX inference leaves a rank open in three places that static input shapes often decide
after all: a shape computed by ops on constants (``op.Range(1, rank - 1, 1)`` as the axes
of an Unsqueeze: data propagation does not evaluate Range), an If whose condition
static sizes fix (``op.Size(x) == 1`` for a ``[3, 3]`` input) and whose branches differ
in rank, and a reduction whose axes are an input of static length.  Here a copy of the
model is simplified (local functions inlined; shape-like integer and boolean nodes
whose inputs are constants evaluated with ``onnx.reference``; ``Shape``/``Size`` of a
value of static shape made constants; an If on a constant condition replaced by the
branch it takes) and inferred again, until the wanted outputs have ranks or nothing
changes.  The written model is not changed: only the output types come from the copy.
Where a rank stays open, :func:`undecided_rank` names the node that leaves it to run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.helper
import onnx.inliner
import onnx.numpy_helper
import onnx.shape_inference

from dsl import reduction_ranks

__all__ = ["UndecidedRank", "settle_output_ranks", "undecided_rank"]

# Ops evaluated on constant inputs: shape arithmetic, whose results stay small.
_FOLDABLE = frozenset({
    "Abs", "Add", "And", "Cast", "CastLike", "Concat", "Constant", "ConstantOfShape", "Div", "Equal",
    "Gather", "Greater", "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul",
    "Neg", "Not", "Or", "Range", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Shape",
    "Size", "Slice", "Squeeze", "Sub", "Unsqueeze", "Where", "Xor",
})
_REDUCE = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
    "ReduceProd", "ReduceSum", "ReduceSumSquare",
})
# Ops whose output has their data input's rank and element type whatever their run-time
# inputs hold (DFT-17 infers nothing once ``dft_length`` is an input, though it changes one size).
_DATA_RANK = frozenset({"DFT"})
_MAX_ELEMENTS = 1024  # a folded value larger than this is left to run time
_MAX_ROUNDS = 16  # each round settles at least one If or folds a node; a chain of Ifs is short


def settle_output_ranks(model: onnx.ModelProto, wanted: list[str]) -> dict[str, onnx.TypeProto]:
    """The types (with a shape) that the outputs named ``wanted`` have once what static
    shapes decide is evaluated; an output whose rank stays open is left out.

    >>> settle_output_ranks(model_proto, ["return_val"])   # doctest: +SKIP
    {'return_val': elem_type: 1 shape { dim {} }}
    """
    work = onnx.ModelProto()
    work.CopyFrom(model)
    if work.functions:
        work = onnx.inliner.inline_local_functions(work)
    opset = next((item.version for item in work.opset_import if item.domain in ("", "ai.onnx")), None)
    found: dict[str, onnx.TypeProto] = {}
    for _ in range(_MAX_ROUNDS):
        types = _inferred(work)
        if types is None:
            break
        for name in wanted:
            known = types.get(name)
            if known is not None and _has_shape(known):
                found[name] = known
        if len(found) == len(wanted) or opset is None or not _simplify(work.graph, types, opset):
            break
    return found


@dataclass(frozen=True)
class UndecidedRank:
    """Why an output's rank is known only at run time: the node that decides it (of the
    model with its local functions inlined), what to say, and what to write instead."""

    node: onnx.NodeProto
    reason: str
    hint: str


def undecided_rank(model: onnx.ModelProto, output: str) -> UndecidedRank | None:
    """Why ``output``'s rank is known only at run time, where the node giving it (through
    Identity nodes) is an If whose branches differ in rank, or a reduction over two or
    more axes given at run time; None where it comes from anything else.

    >>> undecided_rank(model_proto, "return_val").reason   # doctest: +SKIP
    'it comes from an If whose branches give rank 2 and rank 0, ...'
    """
    work = onnx.ModelProto()
    work.CopyFrom(model)
    if work.functions:
        work = onnx.inliner.inline_local_functions(work)
    try:  # (the inferred copy: its If branches' outputs carry their types)
        work = onnx.shape_inference.infer_shapes(work, check_type=False, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        return None
    types = {info.name: info.type for info in [*work.graph.input, *work.graph.value_info, *work.graph.output]}
    producers = {name: node for node in work.graph.node for name in node.output}
    name = output
    node = producers.get(name)
    for _ in range(len(work.graph.node)):  # through Identity nodes, at most once each
        if node is None or node.op_type != "Identity" or node.domain not in ("", "ai.onnx"):
            break
        name = node.input[0]
        node = producers.get(name)
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "If":
        return _undecided_if(node, list(node.output).index(name))
    if node.op_type in _REDUCE and len(node.input) > 1 and node.input[1]:
        axes = _static_dims(types.get(node.input[1]))
        if axes is not None and len(axes) == 1 and axes[0] > 1:
            return UndecidedRank(
                node, f"it comes from {node.op_type} over {axes[0]} axes given at run time, and an axis may "
                      "repeat among them (onnxruntime reduces it once), so the number of axes it removes is "
                      "known only then",
                "give the axes as constants, or one axis at a time, or keepdims=1 (the rank stays the data's)")
    return None


def _undecided_if(node: onnx.NodeProto, index: int) -> UndecidedRank | None:
    ranks = []
    for attribute in node.attribute:
        branch = attribute.g
        if not attribute.HasField("g") or index >= len(branch.output):
            return None
        declared = branch.output[index].type
        if not _has_shape(declared):
            return None
        ranks.append(len(declared.tensor_type.shape.dim))
    if len(set(ranks)) < 2:
        return None
    return UndecidedRank(
        node, f"it comes from an If whose branches give rank {' and rank '.join(map(str, ranks))}, and which "
              "one runs depends on the condition's value",
        "make both branches give the same rank (op.Reshape(v, [-1]) or op.Reshape(v, []) for a one-element "
        "value), or decide the condition from static sizes (x.shape)")


def _inferred(model: onnx.ModelProto) -> dict[str, onnx.TypeProto] | None:
    """Each named value's inferred type, or None where inference refuses the model."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        return None
    graph = inferred.graph
    return {info.name: info.type for info in [*graph.input, *graph.value_info, *graph.output]}


def _simplify(graph: onnx.GraphProto, types: dict[str, onnx.TypeProto], opset: int) -> bool:
    """Rewrite ``graph``'s nodes as what static shapes decide; whether anything changed."""
    constants: dict[str, np.ndarray] = {
        item.name: onnx.numpy_helper.to_array(item) for item in graph.initializer
        if math.prod(item.dims) <= _MAX_ELEMENTS and not item.data_location
    }
    changed = False
    rewritten: list[onnx.NodeProto] = []
    for node in graph.node:
        replacement = _decided(node, constants, types, opset)
        if replacement is None:
            rewritten.append(node)
            ranked = _reduction_rank(node, constants, types) or _data_rank(node, types)
            if ranked is not None and not _has_shape(types.get(node.output[0])):
                _declare(graph, onnx.helper.make_tensor_value_info(node.output[0], ranked[0], [None] * ranked[1]))
                changed = True
            continue
        rewritten.extend(replacement)
        changed = changed or replacement != [node]
    if changed:
        del graph.node[:]
        graph.node.extend(rewritten)
    return changed


def _declare(graph: onnx.GraphProto, info: onnx.ValueInfoProto) -> None:
    """Give a value a type the next inference starts from (a graph output's own, else a value_info)."""
    for output in graph.output:
        if output.name == info.name:
            output.type.CopyFrom(info.type)
            return
    graph.value_info.append(info)


def _decided(node: onnx.NodeProto, constants: dict[str, np.ndarray], types: dict[str, onnx.TypeProto],
             opset: int) -> list[onnx.NodeProto] | None:
    """The nodes standing for ``node`` once static shapes and constants decide it (itself
    for a Constant, recorded in ``constants``), or None where they do not."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "If" and node.input[0] in constants:
        return _taken_branch(node, bool(np.asarray(constants[node.input[0]]).reshape(-1)[0]))
    if node.op_type in ("Shape", "Size") and node.input[0] not in constants:
        dims = _static_dims(types.get(node.input[0]))
        if dims is None:
            return None
        sizes = np.array(_shape_slice(node, dims) if node.op_type == "Shape" else math.prod(dims), dtype=np.int64)
        constants[node.output[0]] = sizes
        return [onnx.helper.make_node("Constant", [], [node.output[0]], value=onnx.numpy_helper.from_array(sizes))]
    if node.op_type not in _FOLDABLE or len(node.output) != 1:
        return None
    given = [name for name in node.input if name]
    if any(name not in constants for name in given) or not _shape_like([constants[name] for name in given]):
        return None
    if not _small_result(node, [constants[name] if name else None for name in node.input]):
        return None
    try:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(node, opsets={"": opset})
        (result,) = evaluator.run(None, {name: constants[name] for name in given})
    except Exception:  # onnx.reference refuses an invalid node: the rank stays open
        return None
    value = np.asarray(result)
    if value.size > _MAX_ELEMENTS or value.dtype == object:
        return None
    constants[node.output[0]] = value
    if node.op_type == "Constant":
        return [node]
    return [onnx.helper.make_node("Constant", [], [node.output[0]], value=onnx.numpy_helper.from_array(value))]


def _taken_branch(node: onnx.NodeProto, condition: bool) -> list[onnx.NodeProto] | None:
    """The nodes of the branch an If on a constant condition takes, its outputs renamed
    to the If's by Identity nodes (ONNX names are unique across a graph's subgraphs)."""
    wanted = "then_branch" if condition else "else_branch"
    branch = next((a.g for a in node.attribute if a.name == wanted and a.HasField("g")), None)
    if branch is None or branch.initializer or len(branch.output) != len(node.output):
        return None
    nodes = list(branch.node)
    nodes += [onnx.helper.make_node("Identity", [inner.name], [outer])
              for inner, outer in zip(branch.output, node.output) if outer]
    return nodes


def _reduction_rank(node: onnx.NodeProto, constants: dict[str, np.ndarray],
                    types: dict[str, onnx.TypeProto]) -> tuple[int, int] | None:
    """(element type, rank) of a reduction over axes given as a run-time input of static
    length (:func:`dsl.reduction_ranks.reduced_shape`)."""
    if node.op_type not in _REDUCE or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
        return None
    if not node.input[1] or node.input[1] in constants:
        return None
    data, axes = types.get(node.input[0]), _static_dims(types.get(node.input[1]))
    if data is None or not _has_shape(data) or axes is None:
        return None
    attributes = {a.name: a.i for a in node.attribute}
    shape = reduction_ranks.reduced_shape([None] * len(data.tensor_type.shape.dim), axes,
                                          bool(attributes.get("keepdims", 1)),
                                          bool(attributes.get("noop_with_empty_axes", 0)))
    return None if shape is None else (data.tensor_type.elem_type, len(shape))


def _data_rank(node: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> tuple[int, int] | None:
    """(element type, rank) of an op of ``_DATA_RANK``: those of its first input."""
    if node.op_type not in _DATA_RANK or node.domain not in ("", "ai.onnx") or not node.input:
        return None
    data = types.get(node.input[0])
    if data is None or not _has_shape(data):
        return None
    return data.tensor_type.elem_type, len(data.tensor_type.shape.dim)


def _has_shape(found: onnx.TypeProto | None) -> bool:
    return found is not None and found.HasField("tensor_type") and found.tensor_type.HasField("shape")


def _static_dims(found: onnx.TypeProto | None) -> list[int] | None:
    if found is None or not _has_shape(found):
        return None
    dims = found.tensor_type.shape.dim
    if not all(dim.HasField("dim_value") for dim in dims):
        return None
    return [dim.dim_value for dim in dims]


def _shape_slice(node: onnx.NodeProto, dims: list[int]) -> list[int]:
    """Shape's ``start``/``end``: negative from the end, clamped to the rank."""
    attributes = {a.name: a.i for a in node.attribute}
    rank = len(dims)
    start, end = attributes.get("start", 0), attributes.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return dims[start:end]


def _shape_like(arrays: list[np.ndarray]) -> bool:
    """Integers and booleans only: the arithmetic of shapes and conditions, exact everywhere."""
    return all(np.asarray(a).dtype.kind in "iub" and np.asarray(a).size <= _MAX_ELEMENTS for a in arrays)


def _small_result(node: onnx.NodeProto, inputs: list[np.ndarray | None]) -> bool:
    """Whether ``node``'s result stays small, decided before it is computed (a Range or a
    ConstantOfShape could ask for any size)."""
    if node.op_type == "Constant":
        return all(math.prod(a.t.dims) <= _MAX_ELEMENTS and len(a.ints) <= _MAX_ELEMENTS for a in node.attribute)
    if node.op_type == "ConstantOfShape":
        shape = inputs[0] if inputs else None
        return shape is not None and bool(np.all(shape >= 0)) and math.prod(int(d) for d in shape.reshape(-1)) <= _MAX_ELEMENTS
    if node.op_type == "Range":
        if len(inputs) != 3 or any(item is None or item.size != 1 for item in inputs):
            return False
        start, limit, delta = (int(np.asarray(item).reshape(-1)[0]) for item in inputs)
        return delta != 0 and max(0, math.ceil((limit - start) / delta)) <= _MAX_ELEMENTS
    if node.op_type in ("Reshape", "Expand", "Tile"):
        return all(item is None or item.size <= _MAX_ELEMENTS for item in inputs)
    present = [item for item in inputs if item is not None]
    try:
        return math.prod(np.broadcast_shapes(*(item.shape for item in present))) <= _MAX_ELEMENTS if present else True
    except ValueError:
        return sum(item.size for item in present) <= _MAX_ELEMENTS
