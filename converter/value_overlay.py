"""Values observed in a run, written onto the model a viewer draws.

``converter.show(model, inputs)`` runs the model eagerly, capturing every value, and this
module writes what was seen where a viewer shows it: each main-graph value gets its
observed type (element type and concrete shape, which Netron draws on the edge) in
``value_info`` with a summary (shape, dtype, and for floating-point tensors min, max,
mean and the count of NaN and infinite elements) as its ``doc_string``; each node gets
``onnxquill.observed`` metadata summarising its outputs, and the nodes whose outputs hold
a NaN or an infinity while none of their inputs did, ``onnxquill.first_nonfinite``: where
a NaN first appears.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

__all__ = ["ValueSummary", "summarize", "overlay_values", "OBSERVED_KEY", "FIRST_NONFINITE_KEY"]

OBSERVED_KEY = "onnxquill.observed"
FIRST_NONFINITE_KEY = "onnxquill.first_nonfinite"
_IR_VALUE_METADATA = 10  # NodeProto / ValueInfoProto metadata_props


@dataclass(frozen=True, slots=True)
class ValueSummary:
    """What one value held in a run; the statistics are None for a non-float tensor.

    >>> str(summarize(np.array([1.0, np.nan], np.float32)))
    'float32[2] min=1 max=1 mean=1 NaN=1'
    """

    dtype: str
    shape: tuple[int, ...] | None
    minimum: float | None = None
    maximum: float | None = None
    mean: float | None = None
    nan_count: int = 0
    inf_count: int = 0

    @property
    def finite(self) -> bool:
        """No NaN and no infinity."""
        return not self.nan_count and not self.inf_count

    def __str__(self) -> str:
        shape = "" if self.shape is None else "[" + ", ".join(map(str, self.shape)) + "]"
        text = f"{self.dtype}{shape}"
        if self.minimum is not None:
            text += f" min={self.minimum:.4g} max={self.maximum:.4g} mean={self.mean:.4g}"
        if self.nan_count:
            text += f" NaN={self.nan_count}"
        if self.inf_count:
            text += f" inf={self.inf_count}"
        return text


def summarize(value: Any) -> ValueSummary:
    """The summary of one captured value (an array, or a sequence/optional as its kind).

    >>> summarize(np.arange(6).reshape(2, 3)).shape
    (2, 3)
    """
    if isinstance(value, list):
        return ValueSummary(f"sequence of {len(value)}", None)
    if value is None:
        return ValueSummary("none", None)
    array = np.asarray(value)
    if array.dtype.kind == "f" and array.size:
        as_float = array.astype(np.float64)
        finite = as_float[np.isfinite(as_float)]
        nan_count = int(np.isnan(as_float).sum())
        inf_count = int(np.isinf(as_float).sum())
        if finite.size:
            return ValueSummary(str(array.dtype), array.shape, float(finite.min()), float(finite.max()),
                                float(finite.mean()), nan_count, inf_count)
        return ValueSummary(str(array.dtype), array.shape, None, None, None, nan_count, inf_count)
    return ValueSummary(str(array.dtype), array.shape)


def overlay_values(model: onnx.ModelProto, values: Mapping[str, Any]) -> dict[str, ValueSummary]:
    """Write the summaries of ``values`` (name -> captured value, as ``eager.run(...,
    capture=True).values``) onto ``model``'s main graph, in place; returns them by name.

    >>> summaries = overlay_values(model, eager.run(model, inputs, capture=True).values)   # doctest: +SKIP
    """
    graph = model.graph
    summaries = {name: summarize(value) for name, value in values.items() if "/" not in name}
    interface = {entry.name: entry for entry in (*graph.input, *graph.output)}
    listed = {entry.name: entry for entry in graph.value_info}
    initializers = {tensor.name for tensor in graph.initializer}
    for name, summary in summaries.items():
        if name in initializers and name not in interface:
            continue
        entry = interface.get(name) or listed.get(name)
        if entry is None:
            entry = graph.value_info.add(name=name)
        if name not in interface:
            _observed_type(entry, values[name])
        entry.doc_string = f"observed: {summary}"
    for node in graph.node:
        _annotate_node(node, summaries)
    model.ir_version = max(model.ir_version, _IR_VALUE_METADATA)
    return summaries


def _observed_type(entry: onnx.ValueInfoProto, value: Any) -> None:
    if isinstance(value, list) or value is None:
        return
    array = np.asarray(value)
    try:
        elem_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    except (KeyError, ValueError, TypeError):
        return
    entry.type.CopyFrom(onnx.helper.make_tensor_type_proto(elem_type, list(array.shape)))


def _annotate_node(node: onnx.NodeProto, summaries: Mapping[str, ValueSummary]) -> None:
    outputs = [(name, summaries[name]) for name in node.output if name in summaries]
    if not outputs:
        return
    _set_prop(node, OBSERVED_KEY, "; ".join(f"{name}: {summary}" for name, summary in outputs))
    bad = [(name, summary) for name, summary in outputs if not summary.finite]
    inputs_finite = all(summaries[name].finite for name in _names_read(node) if name in summaries)
    if bad and inputs_finite:
        described = ", ".join(f"{name} ({summary.nan_count} NaN, {summary.inf_count} inf)" for name, summary in bad)
        _set_prop(node, FIRST_NONFINITE_KEY, f"{described} from finite inputs")


def _names_read(node: onnx.NodeProto) -> set[str]:
    """The names ``node`` reads, those its If/Loop/Scan bodies read included (a body may
    read the enclosing graph's values directly)."""
    names = set(node.input)
    for attr in node.attribute:
        for body in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
            for inner in body.node:
                names |= _names_read(inner)
    return names


def _set_prop(node: onnx.NodeProto, key: str, text: str) -> None:
    for entry in node.metadata_props:
        if entry.key == key:
            entry.value = text
            return
    node.metadata_props.add(key=key, value=text)
