"""The torch kernels (``converter/torch_module/kernels``) on the ONNX backend node cases.

A case is *eligible* when it is one node with tensor inputs and outputs whose op has a
kernel at the case's opset and whose attributes are plain values (no subgraphs).  It is
called the way the module builder calls a kernel (the contract in ``kernels/__init__``):
inputs as tensors (``None`` for an omitted optional one, trailing ones dropped),
attributes as Python values (``torch.Tensor`` for tensor attributes).  Every eligible
case is called through its kernel
and compared with the case's expected outputs: exactly for integers and booleans, at
the case's rtol/atol for floats.  A second test runs ``torch.autograd.gradcheck`` in
float64 on every case whose op is differentiable in its float inputs.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import onnx.numpy_helper
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the optional torch extra)")

from converter.torch_module import kernels  # noqa: E402 - needs torch
from tests.test_backend_node_eager import selected_cases  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

_A = onnx.AttributeProto
_PLAIN = {_A.FLOAT, _A.INT, _A.STRING, _A.TENSOR, _A.FLOATS, _A.INTS, _A.STRINGS}

# numpy dtypes (ml_dtypes included) -> the torch dtype holding the same bits
_BITS_VIEW = {
    "bfloat16": (np.uint16, "bfloat16"),
    "float8_e4m3fn": (np.uint8, "float8_e4m3fn"),
    "float8_e4m3fnuz": (np.uint8, "float8_e4m3fnuz"),
    "float8_e5m2": (np.uint8, "float8_e5m2"),
    "float8_e5m2fnuz": (np.uint8, "float8_e5m2fnuz"),
}


def case_version(case: Any) -> tuple[str, int]:
    node = case.model.graph.node[0]
    versions = {o.domain: o.version for o in case.model.opset_import}
    domain = "" if node.domain == "ai.onnx" else node.domain
    return domain, versions.get(node.domain, versions.get(domain, versions.get("ai.onnx", 1)))


def kernel_of(case: Any) -> Any:
    domain, version = case_version(case)
    return kernels.lookup(domain, case.model.graph.node[0].op_type, version)


def torch_holds(array: np.ndarray) -> bool:
    """Whether torch has a dtype for the array's element type (no 4-bit types, no strings)."""
    return array.dtype.kind in "biufc" or array.dtype.name in _BITS_VIEW


def to_tensor(array: np.ndarray) -> Any:
    if array.dtype.name in _BITS_VIEW:
        bits, name = _BITS_VIEW[array.dtype.name]
        return torch.from_numpy(np.ascontiguousarray(array).view(bits).copy()).view(getattr(torch, name))
    return torch.from_numpy(np.array(array, copy=True, order="C"))


def to_numpy(tensor: Any) -> np.ndarray:
    """A kernel's result as numpy; 8/16-bit floats numpy lacks come back as float32."""
    tensor = tensor.detach()
    if tensor.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz):
        return tensor.to(torch.float32).numpy()
    return tensor.numpy()


def attribute_value(attribute: onnx.AttributeProto) -> Any:
    if attribute.type == _A.TENSOR:
        return to_tensor(onnx.numpy_helper.to_array(attribute.t))
    if attribute.type == _A.STRING:
        return attribute.s.decode("utf-8")
    if attribute.type == _A.STRINGS:
        return [s.decode("utf-8") for s in attribute.strings]
    value = onnx.helper.get_attribute_value(attribute)
    return list(value) if isinstance(value, (list, tuple)) else value


def _arrays(values: list[Any]) -> list[np.ndarray]:
    return [onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v) for v in values]


def case_arrays(case: Any) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    feeds, expected = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    return dict(zip(names, _arrays(list(feeds)))), _arrays(list(expected))


@functools.cache
def eligible_cases() -> list[Any]:
    """Single-node tensor cases whose op has a kernel and whose attributes are plain values."""
    return [
        case for case in selected_cases()
        if kernel_of(case) is not None and all(a.type in _PLAIN for a in case.model.graph.node[0].attribute)
    ]


def call_kernel(case: Any, feeds: dict[str, Any]) -> list[Any]:
    """Call the case's kernel on ``feeds`` (name -> tensor); the outputs in the node's order."""
    node = case.model.graph.node[0]
    inputs = [feeds[name] if name else None for name in node.input]
    while inputs and inputs[-1] is None:
        inputs.pop()
    attributes = {a.name: attribute_value(a) for a in node.attribute}
    domain, _ = case_version(case)
    if (domain, node.op_type) in kernels.NEEDS_OUTPUT_COUNT:
        attributes["output_count"] = len(node.output)
    result = kernel_of(case)(*inputs, **attributes)
    # the builder unpacks a tuple exactly when the schema allows more than one output
    assert isinstance(result, tuple) == _returns_tuple(case), f"{node.op_type}: tuple result {isinstance(result, tuple)}"
    return list(result) if isinstance(result, tuple) else [result]

# Eligible cases the kernels do not reproduce, each with its reason (the goal is none).
EXCLUDED: dict[str, str] = {}

_CASES = eligible_cases()


def _assert_same(got: Any, want: np.ndarray, rtol: float, atol: float, name: str, transform: bool = False) -> None:
    assert str(got.dtype).removeprefix("torch.") == want.dtype.name, f"{name}: dtype {got.dtype}, expected {want.dtype}"
    got_array = to_numpy(got)
    if want.dtype.kind not in "biufc":  # ml_dtypes: compared as float32
        want = want.astype(np.float32)
    assert got_array.shape == want.shape, f"{name}: shape {got_array.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got_array, want, err_msg=name)
        return
    if transform and want.size:
        # a Fourier transform spreads rounding over every output: absolute error scales
        # with the largest value
        atol = max(atol, 4 * float(np.finfo(want.dtype).eps) * float(np.abs(want).max()))
    if got.dtype in (torch.float16, torch.bfloat16):
        # the reference rounds every intermediate to 16 bits, torch only the result:
        # allow two units in the last place of the type
        ulp = torch.finfo(got.dtype).eps
        rtol, atol = max(rtol, 2 * ulp), max(atol, 2 * ulp)
    np.testing.assert_allclose(got_array, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


def _returns_tuple(case: Any) -> bool:
    domain, _ = case_version(case)
    return onnx.defs.get_schema(case.model.graph.node[0].op_type, domain).max_output > 1


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_kernel_reproduces_node_case(case: Any) -> None:
    reason = EXCLUDED.get(case.name)
    if reason is not None:
        pytest.skip(reason)
    feeds, expected = case_arrays(case)
    if not all(torch_holds(array) for array in [*feeds.values(), *expected]):
        pytest.skip("torch has no dtype for an input or output (4-bit types, strings)")
    node = case.model.graph.node[0]
    outputs = call_kernel(case, {name: to_tensor(array) for name, array in feeds.items()})
    by_name = dict(zip(node.output, outputs))
    if node.op_type in RANDOM_OPS:
        RANDOM_OPS[node.op_type](case, feeds, [by_name[o.name] for o in case.model.graph.output], expected)
        return
    for graph_output, want in zip(case.model.graph.output, expected):
        _assert_same(by_name[graph_output.name], want, case.rtol, case.atol, graph_output.name,
                     transform=node.op_type in ("DFT", "STFT"))


# Ops whose expected outputs are one draw of a random generator no other library
# reproduces: checked by property (shapes, dtypes, and every value one a draw can give).
def _check_bernoulli(case: Any, feeds: dict[str, np.ndarray], got: list[Any], expected: list[np.ndarray]) -> None:
    probabilities = next(iter(feeds.values()))
    draw = to_numpy(got[0])
    assert draw.shape == expected[0].shape and draw.dtype == expected[0].dtype
    assert set(np.unique(draw.astype(np.float64)).tolist()) <= {0.0, 1.0}
    assert np.all(draw[probabilities == 1] == 1) and np.all(draw[probabilities == 0] == 0)


def _check_dropout(case: Any, feeds: dict[str, np.ndarray], got: list[Any], expected: list[np.ndarray]) -> None:
    node = case.model.graph.node[0]
    data = feeds[node.input[0]]
    ratio = float(feeds[node.input[1]]) if len(node.input) > 1 and node.input[1] else 0.5
    if not (len(node.input) > 2 and bool(feeds[node.input[2]]) and ratio):  # inference: no draw
        for tensor, want, graph_output in zip(got, expected, case.model.graph.output):
            _assert_same(tensor, want, case.rtol, case.atol, graph_output.name)
        return
    output = to_numpy(got[0])
    assert output.shape == expected[0].shape and output.dtype == expected[0].dtype
    kept = np.isclose(output, data / (1 - ratio), rtol=1e-5) & (output != 0)
    assert np.all(kept | (output == 0))
    if len(got) > 1:
        mask = to_numpy(got[1])
        assert mask.dtype == np.bool_ and mask.shape == data.shape
        np.testing.assert_array_equal(mask, kept | ((data == 0) & mask))


RANDOM_OPS = {"Bernoulli": _check_bernoulli, "Dropout": _check_dropout}


# ----------------------------------------------------------------------------- gradients

# Ops without a derivative to check: their float outputs are piecewise constant in the
# float inputs (the true gradient is zero almost everywhere and the finite differences
# jump), or they draw random numbers.
NOT_DIFFERENTIABLE: dict[str, str] = {
    "Ceil": "piecewise constant", "Floor": "piecewise constant", "Round": "piecewise constant",
    "Sign": "piecewise constant", "Hardmax": "piecewise constant (a one-hot of the argmax)",
    "QuantizeLinear": "rounds to integers", "DynamicQuantizeLinear": "rounds to integers",
    "QLinearMatMul": "rounds to integers", "QLinearConv": "rounds to integers",
    "Bernoulli": "a random draw", "Dropout": "a random draw in training mode (identity otherwise)",
    "Cast": "casts between precisions (a float64 check cannot see through a narrower result)",
    "CastLike": "casts between precisions (a float64 check cannot see through a narrower result)",
    "Range": "shape arithmetic: start, limit and delta are read as numbers",
    "Unique": "the output's length depends on equalities among the values",
}

# Float inputs that are not data (sizes, scales, positions): left out of the check.
NOT_DATA: set[tuple[str, int]] = {("Resize", 1), ("Resize", 2), ("Upsample", 1), ("OneHot", 0), ("OneHot", 1), ("Dropout", 1),
                                  # sampling positions, placed by the cases on pixel centres and edges
                                  # (the kinks of the interpolation)
                                  ("GridSample", 1)}

# Cases whose inputs sit exactly on a point where the op is not differentiable.
AT_A_KINK: dict[str, str] = {
    "test_acosh_example": "acosh at 1, the edge of its domain (infinite slope)",
    "test_elu_example": "elu at 0, where alpha != 1 leaves a kink",
    "test_leakyrelu_example": "leaky_relu at 0",
    "test_selu_example": "selu at 0",
    "test_thresholdedrelu_example": "thresholded_relu at its threshold alpha",
    "test_pow": "a zero base: d(x**y)/dy = x**y * log(x) is undefined at x = 0",
    "test_reduce_min_default_axes_keepdims_example": "the minimum is tied (1 and 1, 2 and 2)",
    "test_maxpool_3d_dilations": "every value is equal: the maximum of each window is a tie",
    "test_maxpool_3d_dilations_use_ref_impl": "every value is equal: the maximum of each window is a tie",
    "test_l2normalization_axis_0": "an all-zero slice: x / ||x|| has no derivative at 0",
    "test_mod_float_edge_cases_fmod_0_float16": "infinite and NaN operands",
    "test_mod_float_edge_cases_fmod_0_float32": "infinite and NaN operands",
    "test_mod_float_edge_cases_fmod_0_float64": "infinite and NaN operands",
    "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal": "the biased scores output holds -inf",
    "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal": "the biased scores output holds -inf",
    "test_attention_24_qk_matmul_output_mode3_softmax_precision": "softmax_precision computes in float32",
}


def _differentiable(case: Any, name: str, array: np.ndarray) -> bool:
    node = case.model.graph.node[0]
    position = list(node.input).index(name)
    return array.dtype.name in ("float16", "float32", "float64") and (node.op_type, position) not in NOT_DATA


def _float_inputs(case: Any, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    return {
        name: to_tensor(array).to(torch.float64).requires_grad_() if _differentiable(case, name, array) else to_tensor(array)
        for name, array in feeds.items()
    }


def _gradient_cases() -> list[Any]:
    chosen = []
    for case in _CASES:
        node = case.model.graph.node[0]
        if node.op_type in NOT_DIFFERENTIABLE or case.name in EXCLUDED:
            continue
        feeds, expected = case_arrays(case)
        floats = [a for name, a in feeds.items() if _differentiable(case, name, a)]
        if floats and all(a.size for a in floats) and all(torch_holds(a) for a in [*feeds.values(), *expected]) and any(
            e.dtype.kind == "f" for e in expected
        ):
            chosen.append(case)
    return chosen


_GRADIENT_CASES = _gradient_cases()


@pytest.mark.parametrize("case", _GRADIENT_CASES, ids=[c.name for c in _GRADIENT_CASES])
def test_kernel_gradient_matches_finite_differences(case: Any) -> None:
    reason = AT_A_KINK.get(case.name)
    if reason is not None:
        pytest.skip(reason)
    feeds = _float_inputs(case, case_arrays(case)[0])
    names = list(feeds)
    differentiable = [name for name in names if feeds[name].requires_grad]

    def run(*values: Any) -> tuple[Any, ...]:
        given = dict(feeds, **dict(zip(differentiable, values)))
        outputs = call_kernel(case, given)
        return tuple(o for o in outputs if o.is_floating_point())

    torch.autograd.gradcheck(run, tuple(feeds[n] for n in differentiable), fast_mode=True, atol=1e-5, rtol=1e-3)


# ------------------------------------------------------------------ shape-like arguments

# Integer inputs the builder may pass as Python tuples when it knows them while converting
# (the contract: kernels take both).  Each case of these ops runs again that way.
SHAPE_OPERANDS: set[tuple[str, int]] = {
    ("Reshape", 1), ("Expand", 1), ("Tile", 1), ("Unsqueeze", 1), ("Squeeze", 1), ("ConstantOfShape", 0),
    ("Slice", 1), ("Slice", 2), ("Slice", 3), ("Slice", 4), ("Pad", 1), ("Pad", 3), ("Split", 1), ("TopK", 1),
    ("Resize", 3), ("OneHot", 1), ("CenterCropPad", 1), ("CumSum", 1), ("CumProd", 1), ("Trilu", 1),
} | {(op, 1) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")}


def _tuple_cases() -> list[Any]:
    chosen = []
    for case in _CASES:
        node = case.model.graph.node[0]
        feeds, _ = case_arrays(case)
        if any((node.op_type, i) in SHAPE_OPERANDS and name and feeds[name].dtype.kind == "i"
               for i, name in enumerate(node.input)) and case.name not in EXCLUDED:
            chosen.append(case)
    return chosen


_TUPLE_CASES = _tuple_cases()


@pytest.mark.parametrize("case", _TUPLE_CASES, ids=[c.name for c in _TUPLE_CASES])
def test_kernel_takes_shape_arguments_as_python_tuples(case: Any) -> None:
    feeds, expected = case_arrays(case)
    node = case.model.graph.node[0]
    given: dict[str, Any] = {name: to_tensor(array) for name, array in feeds.items()}
    for i, name in enumerate(node.input):
        if (node.op_type, i) in SHAPE_OPERANDS and name and feeds[name].dtype.kind == "i":
            values = tuple(int(v) for v in feeds[name].reshape(-1))
            given[name] = values[0] if feeds[name].ndim == 0 else values
    by_name = dict(zip(node.output, call_kernel(case, given)))
    for graph_output, want in zip(case.model.graph.output, expected):
        _assert_same(by_name[graph_output.name], want, case.rtol, case.atol, graph_output.name)


# ------------------------------------------------------------------------- the table


def _schema_versions(domain: str, op_type: str) -> list[int]:
    return sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                   if s.name == op_type and s.domain == domain})


@pytest.mark.parametrize("key", sorted(kernels.KERNELS), ids=["/".join(k) or k[1] for k in sorted(kernels.KERNELS)])
def test_table_entries_name_real_versions_and_return_what_the_schema_declares(key: tuple[str, str]) -> None:
    """Each entry starts at a version the op has, in ascending order, with a plain
    module-level function (fx prints it, pickle finds it)."""
    domain, op_type = key
    versions = _schema_versions(domain, op_type)
    entries = kernels.KERNELS[key]
    assert [since for since, _ in entries] == sorted({since for since, _ in entries})
    for since, kernel in entries:
        assert since in versions, f"{op_type} has no version {since} (versions: {versions})"
        assert kernel.__module__.startswith("converter.torch_module.kernels.")
        assert getattr(__import__(kernel.__module__, fromlist=["_"]), kernel.__name__) is kernel
    assert kernels.lookup(domain, op_type, entries[0][0] - 1) is None
    assert kernels.lookup(domain, op_type, versions[-1]) is entries[-1][1]


@pytest.mark.parametrize("key", sorted(kernels.KERNELS), ids=["/".join(k) or k[1] for k in sorted(kernels.KERNELS)])
def test_kernels_return_a_tuple_exactly_when_the_op_can_have_several_outputs(key: tuple[str, str]) -> None:
    """The builder unpacks a kernel's result when the op's newest schema allows more than
    one output; every kernel of the op follows that, whatever version it serves."""
    domain, op_type = key
    several = onnx.defs.get_schema(op_type, domain).max_output > 1
    for _, kernel in kernels.KERNELS[key]:
        assert str(kernel.__annotations__["return"]).startswith("tuple") == several, kernel.__name__


# ---------------------------------------------------------------------------- torch.export


class _Pipeline(torch.nn.Module):
    """Kernels called the way the builder calls them once shape operands are folded."""

    def forward(self, x: Any, w: Any, q: Any) -> Any:
        from converter.torch_module.kernels import (
            attention,
            convolution,
            elementwise,
            normalization,
            pooling,
            reductions,
            resize,
            shapes,
        )

        y = convolution.conv(x, w, None, auto_pad="SAME_UPPER", strides=[2, 2])
        y, indices = pooling.max_pool(y, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], ceil_mode=1)
        y = pooling.average_pool(y, kernel_shape=[2, 2], auto_pad="SAME_LOWER")
        y = resize.resize(y, None, (1.0, 1.0, 2.0, 2.0), mode="linear")
        y = shapes.slice_(y, (1,), (-1,), (2,), (1,))
        y = shapes.pad(y, (0, 0, 1, 1, 0, 0, 1, 1), torch.tensor(-1.0))
        y = normalization.softmax(shapes.reshape(y, (0, -1)), axis=-1)
        total = reductions.reduce_sum(y, (-1,), keepdims=0)
        return elementwise.add(total, attention.attention(q, q, q, is_causal=1)[0].sum()), indices


def test_kernels_export_with_a_dynamic_batch() -> None:
    """No kernel reads a tensor's values or specialises a symbolic size when its shape
    operands are Python tuples: torch.export keeps the batch dimension dynamic."""
    module = _Pipeline()
    example = (torch.randn(2, 3, 16, 16), torch.randn(4, 3, 3, 3), torch.randn(1, 2, 5, 8))
    batch = torch.export.Dim("batch", min=2, max=64)
    exported = torch.export.export(module, example, dynamic_shapes=({0: batch}, None, None))
    other = (torch.randn(5, 3, 16, 16), example[1], example[2])
    torch.testing.assert_close(exported.module()(*other), module(*other))
