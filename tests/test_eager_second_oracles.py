"""A second oracle (numpy) for the ops whose backend-case check is circular.

The ONNX backend cases of Attention, Resize, FlexAttention and CausalConvWithState have
expected outputs computed by ``onnx.reference``; eager mode runs causal Attention and
``align_corners`` Resize on ``onnx.reference`` too (onnxruntime differs from the spec
there, see ``eager/backend_policy.py``), and FlexAttention and CausalConvWithState
wherever onnxruntime has no kernel, so ``tests/test_backend_node_eager.py`` only checks
onnx.reference against itself for them (it counts them as skipped).  Here the first two
are computed with numpy from their definitions in the ONNX spec.  FlexAttention and
CausalConvWithState have no second oracle yet.
"""

from __future__ import annotations

import numpy as np
import pytest

from dsl.opsets import get_opset

F32 = np.float32


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float | None) -> np.ndarray:
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) * scale
    if causal:
        allowed = np.tril(np.ones(scores.shape[-2:], bool))
        scores = np.where(allowed, scores, -np.inf)
    return (_softmax(scores) @ v.astype(np.float64)).astype(q.dtype)


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("scale", [None, 0.25])
def test_attention_matches_numpy(causal: int, scale: float | None) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)).astype(F32) for _ in range(3))
    attention = get_opset("", 23).Attention
    kwargs = {"is_causal": causal} if scale is None else {"is_causal": causal, "scale": scale}
    got = attention(q, k, v, **kwargs)
    np.testing.assert_allclose(np.asarray(got), _attention(q, k, v, bool(causal), scale), rtol=1e-5, atol=1e-6)


def _align_corners_axis(data: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Linear interpolation along ``axis`` with align_corners: output i samples input i * (n - 1) / (size - 1)."""
    n = data.shape[axis]
    positions = np.arange(size) * ((n - 1) / (size - 1)) if size > 1 else np.zeros(1)
    moved = np.moveaxis(data, axis, -1)
    flat = moved.reshape(-1, n)
    result = np.stack([np.interp(positions, np.arange(n), row) for row in flat])
    return np.moveaxis(result.reshape(*moved.shape[:-1], size), -1, axis)


@pytest.mark.parametrize("sizes", [(1, 1, 2, 3), (1, 1, 7, 9), (1, 1, 4, 2)])
def test_align_corners_linear_resize_matches_numpy(sizes: tuple[int, ...]) -> None:
    x = (np.arange(20, dtype=F32).reshape(1, 1, 4, 5) ** 1.5).astype(F32)
    resize = get_opset("", 19).Resize
    got = resize(x, None, None, np.array(sizes, np.int64), mode="linear",
                 coordinate_transformation_mode="align_corners")
    want = _align_corners_axis(_align_corners_axis(x.astype(np.float64), 2, sizes[2]), 3, sizes[3])
    np.testing.assert_allclose(np.asarray(got), want.astype(F32), rtol=1e-5, atol=1e-5)
