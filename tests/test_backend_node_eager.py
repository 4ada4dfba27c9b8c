"""Every ONNX backend node test case, run eagerly through the dsl opsets.

Each single-node case whose graph inputs and outputs are tensors (and, separately,
each one with sequences or optionals of tensors: lists of arrays and None) is called as
``get_opset(domain, version).get_op(op_type)`` on the case's own inputs and attributes
(converted from the protos to Python values: ints, floats, str, numpy arrays, lists;
subgraphs stay GraphProtos), and compared with the case's expected outputs at the
case's rtol/atol.  The call is ``op(*inputs, **attributes)``; when the node binds more
outputs than the op's default (optional outputs such as Dropout's mask), it goes through
:func:`eager.call_op` — what ``Op.__call__`` calls — with ``num_outputs``, since
``y, mask = op.Dropout(x)`` unpacking cannot be written for a count known only at run
time.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest

import eager
from dsl.opsets import get_opset

pytestmark = pytest.mark.slow

# Cases no backend can run: neither onnxruntime nor onnx.reference implements the op
# (or the element type) the case needs.  Each entry says which and why.  With the
# releases tested so far (onnxruntime 1.31 and 1.32, onnx 1.23) every case has at least
# one backend, so the only entries are conditional: onnx.reference decodes images with
# Pillow, an optional package.
EXCLUDED: dict[str, str] = {}
_IMAGE_DECODER_REASON = "onnxruntime has no ImageDecoder kernel and onnx.reference needs Pillow, which is not installed"

# Cases whose expected output is one draw of a random generator (Bernoulli has no
# reproducible stream across backends, not even with ``seed``): compared by property —
# same shape and dtype, every value 0 or 1, and a value of 1 wherever the probability is
# 1 and 0 where it is 0.
RANDOM_CASES = {"test_bernoulli", "test_bernoulli_double", "test_bernoulli_seed"}


@functools.cache
def all_cases() -> list[Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(collect_testcases())


def _is_tensor_io(model: onnx.ModelProto) -> bool:
    graph = model.graph
    return all(v.type.HasField("tensor_type") for v in [*graph.input, *graph.output])


def selected_cases() -> list[Any]:
    """Single-node cases with tensor inputs and outputs only."""
    return [c for c in all_cases() if len(c.model.graph.node) == 1 and _is_tensor_io(c.model)]


def _holds_tensors(type_proto: onnx.TypeProto) -> bool:
    if type_proto.HasField("sequence_type"):
        return _holds_tensors(type_proto.sequence_type.elem_type)
    if type_proto.HasField("optional_type"):
        return _holds_tensors(type_proto.optional_type.elem_type)
    return type_proto.HasField("tensor_type")


def sequence_cases() -> list[Any]:
    """Single-node cases with a sequence or optional input or output (of tensors)."""
    return [
        c for c in all_cases()
        if len(c.model.graph.node) == 1 and not _is_tensor_io(c.model)
        and all(_holds_tensors(v.type) for v in [*c.model.graph.input, *c.model.graph.output])
    ]


def to_array(value: Any) -> Any:
    """A case's value as eager mode takes it: an array, a list of arrays (a sequence), or None."""
    if value is None:
        return None
    if isinstance(value, list):
        return [to_array(item) for item in value]
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def attribute_value(attribute: onnx.AttributeProto) -> Any:
    """An AttributeProto as the Python value a user would pass as a keyword."""
    kind = attribute.type
    A = onnx.AttributeProto
    if kind == A.TENSOR:
        return onnx.numpy_helper.to_array(attribute.t)
    if kind == A.TENSORS:
        return [onnx.numpy_helper.to_array(t) for t in attribute.tensors]
    if kind == A.STRING:
        return attribute.s.decode("utf-8")
    if kind == A.STRINGS:
        return [s.decode("utf-8") for s in attribute.strings]
    if kind in (A.SPARSE_TENSOR, A.TYPE_PROTO, A.TYPE_PROTOS, A.SPARSE_TENSORS):
        return attribute  # no plain Python value: eager mode accepts the proto itself
    return onnx.helper.get_attribute_value(attribute)


def run_case(case: Any) -> None:
    """Run one case eagerly and compare with its expected outputs (raises AssertionError)."""
    model = case.model
    node = model.graph.node[0]
    versions = {o.domain: o.version for o in model.opset_import}
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = versions.get(node.domain, versions.get(domain, versions.get("ai.onnx", 1)))
    op = get_opset(domain, version).get_op(node.op_type)
    feeds_list, expected_list = case.data_sets[0]
    feeds = {i.name: to_array(v) for i, v in zip(model.graph.input, feeds_list)}
    inputs = [feeds[name] if name else None for name in node.input]
    while inputs and inputs[-1] is None:
        inputs.pop()
    attributes = {a.name: attribute_value(a) for a in node.attribute}
    if len(node.output) == op.default_output_count():
        result = op(*inputs, **attributes)  # what a user types
    else:  # the node binds optional outputs: say how many, as unpacking would
        result = eager.call_op(op, inputs, attributes, num_outputs=len(node.output))
    outputs = list(result) if isinstance(result, tuple) else [result]
    by_name = dict(zip(node.output, outputs))
    for graph_output, want in zip(model.graph.output, expected_list):
        got = by_name[graph_output.name]
        if case.name in RANDOM_CASES:
            assert_random_draw(got, to_array(want), inputs[0])
        else:
            assert_same(got, to_array(want), case.rtol, case.atol, graph_output.name)


def assert_random_draw(got: Any, want: np.ndarray, probabilities: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    assert set(np.unique(got.astype(np.float64)).tolist()) <= {0.0, 1.0}
    assert np.all(got[probabilities == 1] == 1) and np.all(got[probabilities == 0] == 0)


def assert_same(got: Any, want: Any, rtol: float, atol: float, name: str) -> None:
    if isinstance(want, list):
        assert isinstance(got, list), f"output {name}: {type(got).__name__}, expected a sequence"
        assert len(got) == len(want), f"output {name}: {len(got)} tensors, expected {len(want)}"
        for position, (got_item, want_item) in enumerate(zip(got, want)):
            assert_same(got_item, want_item, rtol, atol, f"{name}[{position}]")
        return
    assert got is not None, f"output {name} was not produced"
    got = np.asarray(got)
    assert got.shape == want.shape, f"output {name}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype or (got.dtype.kind, want.dtype.kind) == ("O", "O"), (
        f"output {name}: dtype {got.dtype}, expected {want.dtype}"
    )
    if want.dtype == object:
        assert got.tolist() == want.tolist(), f"output {name}: {got!r} != {want!r}"
        return
    if want.dtype.kind not in "biufc":  # ml_dtypes (bfloat16, float8, 4-bit): compare as float32
        got = got.astype(np.float32)
        want = want.astype(np.float32)
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want, err_msg=f"output {name}")
        return
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {name}")


_CASES = selected_cases()


# The selection counted with the onnx release the project was measured on; another
# release ships other cases, and every one of them is still run by test_node_case.
_COUNTED_ONNX = "1.23."
_requires_counted_onnx = pytest.mark.skipif(
    not onnx.__version__.startswith(_COUNTED_ONNX), reason=f"cases counted with onnx {_COUNTED_ONNX}x"
)


@_requires_counted_onnx
def test_selection_count() -> None:
    assert len(_CASES) == 1439, "the onnx version changed: update the count in the report"


_SEQUENCE_CASES = sequence_cases()


@_requires_counted_onnx
def test_sequence_selection_count() -> None:
    assert len(_SEQUENCE_CASES) == 23, "the onnx version changed: update the count in the report"


@pytest.mark.parametrize("case", _SEQUENCE_CASES, ids=[c.name for c in _SEQUENCE_CASES])
def test_sequence_node_case(case: Any) -> None:
    run_case(case)


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_node_case(case: Any) -> None:
    reason = EXCLUDED.get(case.name)
    if reason is not None:
        pytest.skip(reason)
    if case.model.graph.node[0].op_type == "ImageDecoder":
        pytest.importorskip("PIL", reason=_IMAGE_DECODER_REASON)
    run_case(case)
