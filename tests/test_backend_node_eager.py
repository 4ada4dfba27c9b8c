"""Every ONNX backend node test case, run eagerly through the dsl opsets.

Multi-node cases (the ``_expanded`` function bodies and a few others) run whole with
:func:`eager.run`, node by node, against their expected outputs (``test_multi_node_case``).
The rest of this docstring is about the single-node cases.

Each single-node case whose graph inputs and outputs are tensors (and, separately,
each one with sequences or optionals of tensors: lists of arrays and None) is called as
``get_opset(domain, version).get_op(op_type)`` on the case's own inputs and attributes
(converted from the protos to Python values: ints, floats, str, numpy arrays, lists;
subgraphs stay GraphProtos), and compared with the case's expected outputs at the
case's rtol/atol (integer and bool outputs exactly).  Where the expected outputs were
computed by ``onnx.reference`` and eager mode ran the op on ``onnx.reference`` too (no
onnxruntime kernel, or one that differs from the spec), the check is circular: such a
case is run, then skipped with that reason so the summary counts it;
``tests/test_eager_second_oracles.py`` backs causal Attention and ``align_corners``
Resize with numpy.  The call is ``op(*inputs, **attributes)``; when the node binds more
outputs than the op's default (optional outputs such as Dropout's mask), it goes through
:func:`eager.call_op` — what ``Op.__call__`` calls — with ``num_outputs``, since
``y, mask = op.Dropout(x)`` unpacking cannot be written for a count known only at run
time.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest

import eager
from dsl.errors import EagerError
from dsl.opsets import get_opset
from tests.runtime_probes import onnxruntime_verdict

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


def _fed_empty(node: onnx.NodeProto, index: int, feeds: dict[str, Any]) -> bool:
    """Whether the node's input ``index`` is a graph input fed with an empty optional (None)."""
    name = node.input[index]
    return bool(name) and name in feeds and feeds[name] is None


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


def call_case(case: Any) -> tuple[dict[str, Any], list[Any]]:
    """Call the case's op eagerly as a user would; its outputs by the node's output names,
    and the inputs it was called with."""
    model = case.model
    node = model.graph.node[0]
    versions = {o.domain: o.version for o in model.opset_import}
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = versions.get(node.domain, versions.get(domain, versions.get("ai.onnx", 1)))
    op = get_opset(domain, version).get_op(node.op_type)
    feeds = {i.name: to_array(v) for i, v in zip(model.graph.input, case.data_sets[0][0])}
    inputs = [feeds[name] if name else None for name in node.input]
    while inputs and inputs[-1] is None and not _fed_empty(node, len(inputs) - 1, feeds):
        inputs.pop()  # (an omitted optional input; a fed empty optional is a value and stays)
    attributes = {a.name: attribute_value(a) for a in node.attribute}
    if len(node.output) == op.default_output_count():
        result = op(*inputs, **attributes)  # what a user types
    else:  # the node binds optional outputs: say how many, as unpacking would
        result = eager.call_op(op, inputs, attributes, num_outputs=len(node.output))
    outputs = list(result) if isinstance(result, tuple) else [result]
    return dict(zip(node.output, outputs)), inputs


def run_case(case: Any) -> None:
    """Run one case eagerly and compare with its expected outputs (raises AssertionError)."""
    by_name, inputs = call_case(case)
    for graph_output, want in zip(case.model.graph.output, case.data_sets[0][1]):
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
    if want.dtype.kind in "biu":  # integers and bools exactly: rtol would let 1000 pass for 1001
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
    if not _refused_as_onnxruntime_refuses(case):
        run_case(case)


def _case_feeds(case: Any) -> dict[str, Any]:
    return {i.name: to_array(v) for i, v in zip(case.model.graph.input, case.data_sets[0][0])}


def _refused_as_onnxruntime_refuses(case: Any, run: Any = None) -> bool:
    """Where onnxruntime refuses the case's own model (it has the op and refuses the call:
    a limitation such as batchwise RNN layouts, or the run's data), eager mode must refuse
    the call too, with an EagerError (the exported model would meet that refusal); True
    when it did.  Where onnxruntime runs it or lacks the op, False: the outputs are compared."""
    verdict, message = onnxruntime_verdict(case.model, _case_feeds(case))
    if verdict != "refuses":
        return False
    with pytest.raises(EagerError) as raised:
        (run or run_case)(case)
    assert "onnxruntime" in raised.value.backend_messages or "onnxruntime" in str(raised.value), message
    return True


@functools.cache
def reference_generated_ops() -> frozenset[str]:
    """Op types (lower case) whose case generators in the installed onnx compute the expected
    outputs with ``onnx.reference`` (probed from their source: ``resize.py`` -> ``resize``)."""
    import onnx.backend.test.case.node as node_cases

    folder = Path(node_cases.__file__).parent
    return frozenset(
        path.stem.replace("_", "").lower() for path in folder.glob("*.py") if "onnx.reference" in path.read_text("utf-8")
    )


def circular_oracle(case: Any) -> bool:
    """The expected outputs came from onnx.reference, and onnx.reference ran the op eagerly too
    (onnxruntime has no kernel for it): the comparison checks onnx.reference against itself."""
    op_type = case.model.graph.node[0].op_type.lower()
    report = eager.last_backend()
    return op_type in reference_generated_ops() and report is not None and report.backend == "onnx.reference"


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_node_case(case: Any) -> None:
    reason = EXCLUDED.get(case.name)
    if reason is not None:
        pytest.skip(reason)
    if case.model.graph.node[0].op_type == "ImageDecoder":
        pytest.importorskip("PIL", reason=_IMAGE_DECODER_REASON)
    if _refused_as_onnxruntime_refuses(case):
        return
    run_case(case)
    if circular_oracle(case):
        # Checked (inputs, attributes and outputs went through eager mode), but against the
        # backend that computed the answer: counted apart.  tests/test_eager_second_oracles.py
        # compares these ops with numpy.
        pytest.skip("circular oracle: expected outputs and eager's backend are both onnx.reference")


def multi_node_cases() -> list[Any]:
    """Cases of more than one node (mostly the ``_expanded`` function bodies) whose inputs
    and outputs are tensors, sequences or optionals of tensors."""
    return [
        c for c in all_cases()
        if len(c.model.graph.node) != 1
        and all(_holds_tensors(v.type) for v in [*c.model.graph.input, *c.model.graph.output])
    ]


_MULTI_NODE_CASES = multi_node_cases()
# Node by node, float16 rounds after every node, where onnxruntime's one session for the
# whole graph may keep float32 between fused nodes: two float16 steps (2 ** -9) of slack.
_FLOAT16_NODE_BY_NODE_RTOL = 2.0**-9


@_requires_counted_onnx
def test_multi_node_selection_count() -> None:
    assert len(_MULTI_NODE_CASES) == 422, "the onnx version changed: update the count in the report"


@pytest.mark.parametrize("case", _MULTI_NODE_CASES, ids=[c.name for c in _MULTI_NODE_CASES])
def test_multi_node_case(case: Any) -> None:
    """The whole graph run eagerly node by node (:func:`eager.run`), against the expected outputs."""
    feeds, expected = case.data_sets[0]
    if _refused_as_onnxruntime_refuses(case, lambda c: eager.run(c.model, [to_array(v) for v in feeds])):
        return
    outputs = eager.run(case.model, [to_array(v) for v in feeds])
    assert len(outputs) == len(case.model.graph.output)
    for graph_output, want, got in zip(case.model.graph.output, expected, outputs):
        want = to_array(want)
        if case.name.removesuffix("_expanded") in RANDOM_CASES:
            assert_random_draw(got, want, to_array(feeds[0]))
            continue
        rtol = case.rtol
        if isinstance(want, np.ndarray) and want.dtype == np.float16:
            rtol = max(rtol, _FLOAT16_NODE_BY_NODE_RTOL)
        assert_same(got, want, rtol, case.atol, graph_output.name)
