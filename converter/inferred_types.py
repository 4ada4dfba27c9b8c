"""Output types a model's IR leaves open, filled from ONNX shape inference.

A model's outputs must be typed (the checker wants an element type and a rank), and
IR from an unannotated ``@script`` function or a cut at an inner value may not say
them.  Inference runs without data propagation first (shapes computed from Shape,
Concat, ... values: it more than doubles inference's time on a long chain) and again
with it only where an output's type or a dimension stays open, so the types are those
full inference gives either way.
"""

from __future__ import annotations

import re

import onnx
import onnx.shape_inference

from converter.output_ranks import settle_output_ranks, undecided_rank
from converter.value_encoding import is_complete
from dsl import ir
from dsl.errors import ConversionError

__all__ = ["infer_missing_output_types"]


def infer_missing_output_types(model: onnx.ModelProto, graph: ir.Graph, overrides: dict[int, ir.IRType],
                               require_ranks: bool = True) -> None:
    """Fill the output types ``graph`` (the IR ``model`` was written from) lacks, with
    ``overrides`` (``io_types``) taken as given; inference runs only when one lacks.
    ``require_ranks=False`` leaves an output whose rank nobody can tell rank-less (for a
    caller that checks declared shapes itself and reports them at its own locations).

    >>> infer_missing_output_types(model_proto, function.graph, {})   # doctest: +SKIP
    """
    missing = [
        index
        for index, value in enumerate(graph.outputs)
        if not is_complete(overrides.get(id(value), value.type))
    ]
    if not missing:
        return
    wanted = [model.graph.output[index].name for index in missing]
    # Data propagation (shapes computed from Shape, Concat, ... values) doubles inference's
    # time: it runs only where plain inference leaves an output's type or a dimension open.
    known = _inferred_types(model, wanted, graph, data_prop=False)
    if not all(_settled(known.get(name)) for name in wanted):
        known = _inferred_types(model, wanted, graph, data_prop=True)
    if require_ranks:
        _settle_ranks(model, missing, known)
    for index in missing:
        output = model.graph.output[index]
        found = known.get(output.name)
        if found is None or found.type.WhichOneof("value") is None:
            if output.type.WhichOneof("value") is None:
                value = graph.outputs[index]
                raise ConversionError(
                    f"the type of output {output.name!r} is unknown and ONNX shape inference cannot tell it",
                    value.location or graph.location,
                    hint="annotate the return type (-> FLOAT[...]) or pass io_types",
                )
            if require_ranks:
                _require_rank(model, output, graph.outputs[index], graph)
            continue
        declared = output.type
        merged = onnx.TypeProto()
        merged.CopyFrom(found.type)
        if declared.HasField("tensor_type") and merged.HasField("tensor_type"):
            # The declared element type is the user's word; inference only adds the shape.
            if declared.tensor_type.elem_type:
                merged.tensor_type.elem_type = declared.tensor_type.elem_type
            if declared.tensor_type.HasField("shape") and not merged.tensor_type.HasField("shape"):
                merged.tensor_type.shape.CopyFrom(declared.tensor_type.shape)
        output.type.CopyFrom(merged)
        if require_ranks:
            _require_rank(model, output, graph.outputs[index], graph)


def _settle_ranks(model: onnx.ModelProto, missing: list[int], known: dict[str, onnx.ValueInfoProto]) -> None:
    """Where inference leaves an output's rank open, what the model's static shapes decide
    (:mod:`converter.output_ranks`), added to ``known``; the written model stays as it is."""
    names = [model.graph.output[index].name for index in missing]
    open_ranks = [name for name in names if not _has_rank(known.get(name))]
    if not open_ranks or not all(item.type.tensor_type.HasField("shape") for item in model.graph.input
                                 if item.type.HasField("tensor_type")):
        return  # (a rank-less input leaves the outputs' ranks open: no error is due)
    for name, found in settle_output_ranks(model, open_ranks).items():
        info = onnx.ValueInfoProto()
        info.name = name
        info.type.CopyFrom(found)
        known[name] = info


def _has_rank(found: onnx.ValueInfoProto | None) -> bool:
    return found is not None and (not found.type.HasField("tensor_type") or found.type.tensor_type.HasField("shape"))


def _require_rank(model: onnx.ModelProto, output: onnx.ValueInfoProto, value: ir.Value, graph: ir.Graph) -> None:
    """A model's tensor output needs a rank (the checker wants its shape field): where
    every input has one and neither the function nor inference says the output's (an If
    whose branches give different ranks, a reduction over axes that are an input), only
    the user can.  Where an input is rank-less (``FLOAT[...]`` without ``io_types``) the
    output's rank follows from it: that input is what the user leaves open."""
    if not output.type.HasField("tensor_type") or output.type.tensor_type.HasField("shape"):
        return
    if all(item.type.tensor_type.HasField("shape") for item in model.graph.input if item.type.HasField("tensor_type")):
        undecided = undecided_rank(model, output.name)
        if undecided is not None:
            raise ConversionError(
                f"the rank of output {output.name!r} is known only at run time: {undecided.reason}; a model's "
                "outputs need one rank (onnx.checker)",
                _node_location(graph, undecided.node) or value.location or graph.location,
                hint=undecided.hint,
            )
        raise ConversionError(
            f"the rank of output {output.name!r} is unknown: the function does not say it and ONNX shape "
            "inference cannot tell it, and a model's outputs need one",
            value.location or graph.location,
            hint="annotate the return type with its dimensions (-> FLOAT['N', 'M']) or pass io_types",
        )


def _node_location(graph: ir.Graph, node: onnx.NodeProto) -> ir.SourceLocation | None:
    """Where the IR node that ``node`` was written from is, found by its op and its (or its
    branches') output names; a node of an inlined function carries its names with a
    ``__N`` suffix."""
    names = {re.sub(r"__\d+$", "", name) for name in node.output}
    names.update(re.sub(r"__\d+$", "", inner.name) for attribute in node.attribute if attribute.HasField("g")
                 for inner in attribute.g.output)
    pending, seen = [graph], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for candidate, _ in ir.walk(current):
            if candidate.callee is not None:
                pending.append(candidate.callee.graph)
            if candidate.op_type != node.op_type:
                continue
            outputs = [value.name for value in candidate.outputs]
            outputs += [value.name for branch in ir.subgraphs(candidate) for value in branch.outputs]
            if names.intersection(outputs):
                return candidate.location
    return None


def _inferred_types(
    model: onnx.ModelProto, wanted: list[str], graph: ir.Graph, *, data_prop: bool
) -> dict[str, onnx.ValueInfoProto]:
    """The value infos ONNX shape inference gives the graph's inputs and outputs, and its
    inner values where an output in ``wanted`` is not among those."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=data_prop)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        if not data_prop:  # (the run with data propagation says what is wrong)
            return {}
        raise ConversionError(
            f"ONNX shape inference failed on the exported model: {error}",
            graph.location,
            hint="annotate the return type so that no inference is needed",
        ) from None
    # Inference types the graph's outputs itself: the value_info it adds for every inner
    # value (reading each costs as much as writing a node) is read only when it did not.
    known = {vi.name: vi for vi in inferred.graph.output if vi.type.WhichOneof("value") is not None}
    known.update({vi.name: vi for vi in inferred.graph.input})
    if any(name not in known for name in wanted):
        known = {**{vi.name: vi for vi in inferred.graph.value_info}, **known}
    return known


def _settled(found: onnx.ValueInfoProto | None) -> bool:
    """Whether an inferred type says all data propagation could: a tensor's every
    dimension a number or a name other than the ``unk__N`` that inference makes up for
    a dimension it does not know (a user's name of that form costs a second run, no more)."""
    if found is None or found.type.WhichOneof("value") is None:
        return False
    if not found.type.HasField("tensor_type"):
        return True
    tensor = found.type.tensor_type
    if not tensor.elem_type or not tensor.HasField("shape"):
        return False
    return all(
        dim.HasField("dim_value") or (dim.HasField("dim_param") and not dim.dim_param.startswith("unk__"))
        for dim in tensor.shape.dim
    )
