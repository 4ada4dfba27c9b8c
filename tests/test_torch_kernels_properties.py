"""Properties of the torch kernels against numpy: broadcasting, negative axes, slicing,
padding modes and integer arithmetic, on shapes and values hypothesis draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch", reason="torch is not installed (the optional torch extra)")

from converter.torch_module.kernels import elementwise, indexing, normalization, reductions, shapes  # noqa: E402

pytestmark = pytest.mark.torch

_FEW = settings(max_examples=40)
_floats = st.floats(-10, 10, allow_nan=False, width=32)


@st.composite
def broadcastable_pairs(draw: st.DrawFn, dtype: type = np.float32) -> tuple[np.ndarray, np.ndarray]:
    shapes_drawn = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4))
    elements = _floats if dtype == np.float32 else st.integers(-50, 50)
    first = draw(hnp.arrays(dtype, shapes_drawn.input_shapes[0], elements=elements))
    second = draw(hnp.arrays(dtype, shapes_drawn.input_shapes[1], elements=elements))
    return first, second


@_FEW
@given(broadcastable_pairs())
def test_binary_float_ops_broadcast_like_numpy(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_allclose(elementwise.add(ta, tb).numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(elementwise.mul(ta, tb).numpy(), a * b, rtol=1e-6)
    np.testing.assert_array_equal(elementwise.less(ta, tb).numpy(), a < b)
    np.testing.assert_allclose(elementwise.max(ta, tb).numpy(), np.maximum(a, b))


@_FEW
@given(broadcastable_pairs(np.int64))
def test_integer_division_truncates_and_mod_follows_fmod(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    b = np.where(b == 0, 1, b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    quotient = elementwise.div(ta, tb)
    assert quotient.dtype == torch.int64
    np.testing.assert_array_equal(quotient.numpy(), np.trunc(a / b).astype(np.int64))
    np.testing.assert_array_equal(elementwise.mod(ta, tb).numpy(), np.mod(a, b))
    np.testing.assert_array_equal(elementwise.mod(ta, tb, fmod=1).numpy(), np.fmod(a, b))


@st.composite
def array_and_axes(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...]]:
    array = draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), elements=_floats))
    rank = array.ndim
    axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                         unique_by=lambda a: a % rank))
    return array, tuple(axes)


@_FEW
@given(array_and_axes(), st.booleans())
def test_reductions_take_negative_axes(drawn: tuple[np.ndarray, tuple[int, ...]], keepdims: bool) -> None:
    array, axes = drawn
    tensor = torch.from_numpy(array)
    normal = tuple(a % array.ndim for a in axes)
    for kernel, oracle in ((reductions.reduce_sum, np.sum), (reductions.reduce_max, np.max),
                           (reductions.reduce_mean, np.mean)):
        got = kernel(tensor, torch.tensor(axes), keepdims=int(keepdims)).numpy()
        np.testing.assert_allclose(got, oracle(array, axis=normal, keepdims=keepdims), rtol=1e-9)
    axis = axes[0]
    np.testing.assert_array_equal(reductions.arg_max(tensor, axis=axis, keepdims=0).numpy(), np.argmax(array, axis=axis))


@_FEW
@given(array_and_axes())
def test_softmax_and_unsqueeze_take_negative_axes(drawn: tuple[np.ndarray, tuple[int, ...]]) -> None:
    array, axes = drawn
    axis = axes[0]
    shifted = np.exp(array - array.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(normalization.softmax(torch.from_numpy(array), axis=axis).numpy(),
                               shifted / shifted.sum(axis=axis, keepdims=True), rtol=1e-9)
    inserted = shapes.unsqueeze(torch.from_numpy(array), (axis,)).numpy()
    assert inserted.shape == np.expand_dims(array, axis).shape  # numpy counts a negative axis in the result too


@_FEW
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=st.integers(-9, 9)),
       st.data())
def test_slice_clamps_as_the_onnx_spec_says(array: np.ndarray, data: st.DataObject) -> None:
    """Starts and ends clamp as ONNX's Slice text says, which is Python's slicing but for
    a negative step from a start before the first element (ONNX starts at the first
    element, Python selects nothing); the kernel and the shape arithmetic share it."""
    axis = data.draw(st.integers(-array.ndim, array.ndim - 1))
    bound = st.integers(-9, 9) | st.sampled_from([-(2**63), 2**63 - 1])
    start, end = data.draw(bound), data.draw(bound)
    step = data.draw(st.integers(-3, 3).filter(bool))
    positions = _spec_slice_positions(start, end, step, array.shape[axis])
    got = shapes.slice_(torch.from_numpy(array), (start,), (end,), (axis,), (step,))
    np.testing.assert_array_equal(got.numpy(), np.take(array, positions, axis=axis))
    sizes = tuple(range(array.shape[axis]))
    assert shapes.slice_sequence(sizes, start, end, step) == tuple(positions)


def _spec_slice_positions(start: int, end: int, step: int, size: int) -> list[int]:
    """The ONNX Slice text: negative bounds count from the end, then starts clamp into
    [0, size] (step > 0) or [0, size - 1] (step < 0), ends into [0, size] or [-1, size - 1]."""
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
    return list(range(start, end, step))


def test_a_backward_slice_from_before_the_first_element_starts_there() -> None:
    # (what onnxruntime computes too; Python's x[-9::-1] is empty)
    got = shapes.slice_(torch.arange(3), (-9,), (-(2**63),), (0,), (-1,))
    np.testing.assert_array_equal(got.numpy(), [0])
    assert shapes.slice_sequence((4, 5), -9, -9, -1) == (4,)


@_FEW
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4), elements=_floats),
       st.sampled_from(["constant", "edge", "reflect", "wrap"]), st.data())
def test_pad_matches_numpy_pad(array: np.ndarray, mode: str, data: st.DataObject) -> None:
    limit = 1 if mode == "reflect" else 3  # numpy reflects at most size - 1 without repeating
    widths = [(data.draw(st.integers(0, limit)), data.draw(st.integers(0, limit))) for _ in range(array.ndim)]
    pads = [begin for begin, _ in widths] + [end for _, end in widths]
    got = shapes.pad(torch.from_numpy(array), tuple(pads), torch.tensor(1.5), mode=mode)
    if mode == "constant":
        want = np.pad(array, widths, mode="constant", constant_values=1.5)
    else:
        want = np.pad(array, widths, mode={"edge": "edge", "reflect": "reflect", "wrap": "wrap"}[mode])
    np.testing.assert_array_equal(got.numpy(), want)


@_FEW
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), elements=_floats), st.data())
def test_gather_wraps_negative_indices_like_numpy_take(array: np.ndarray, data: st.DataObject) -> None:
    axis = data.draw(st.integers(-array.ndim, array.ndim - 1))
    size = array.shape[axis]
    indices = data.draw(hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
                                   elements=st.integers(-size, size - 1)))
    got = indexing.gather(torch.from_numpy(array), torch.from_numpy(indices), axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.take(array, indices, axis=axis))


@_FEW
@given(hnp.arrays(np.float64, st.integers(1, 12), elements=st.floats(-8, 8, allow_nan=False).map(lambda v: round(v * 2) / 2)))
def test_round_is_half_to_even(array: np.ndarray) -> None:
    np.testing.assert_array_equal(elementwise.round(torch.from_numpy(array)).numpy(), np.round(array))
