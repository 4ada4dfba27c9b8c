"""``x.shape``, ``x.ndim``, ``len(x.shape)`` and ``x.dtype`` inside ``@script``: compiled
(onnxruntime) and eager results agree with numpy, static sizes are Python ints that leave
no Shape node in the model, symbolic sizes lower to Shape/Gather only where used."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from dsl import BOOL, DOUBLE, FLOAT, INT64, script
from dsl import opset18 as op
from dsl.errors import DslTypeError
from tests.helpers import check_script

F32 = np.float32


def _op_types(function) -> list[str]:
    model = function.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    return [node.op_type for node in model.graph.node]


@pytest.mark.parametrize(("batch", "sequence"), [(1, 1), (3, 5), (2, 33)])
def test_unpacked_symbolic_sizes_reshape_like_numpy(batch: int, sequence: int) -> None:
    @script()
    def split_heads(x: FLOAT["B", "S", 64]) -> FLOAT["B", 4, "S", 16]:
        b, s, d = x.shape
        return op.Transpose(op.Reshape(x, [b, s, 4, d // 4]), perm=[0, 2, 1, 3])

    x = np.random.default_rng(0).standard_normal((batch, sequence, 64)).astype(F32)
    check_script(split_heads, [x], x.reshape(batch, sequence, 4, 16).transpose(0, 2, 1, 3))
    assert _op_types(split_heads).count("Shape") == 1  # one Shape for both sizes


def test_static_sizes_are_python_ints_and_make_no_shape_node() -> None:
    @script()
    def scaled(q: FLOAT[2, 3, 8]) -> FLOAT[2, 3, 8]:
        scale = 1.0 / (q.shape[-1] ** 0.5)
        return q * scale * (len(q.shape) + q.ndim)

    q = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(F32)
    check_script(scaled, [q], q * (1.0 / 8 ** 0.5) * 6)
    assert "Shape" not in _op_types(scaled)


def test_size_arithmetic_and_comparison_on_symbolic_sizes() -> None:
    @script()
    def doubled(x: FLOAT["N", 4]) -> FLOAT["M", 2]:
        n = x.shape[0]
        y = op.Reshape(x, [n * 2, -1])
        if n > 2:
            z = y * 2.0
        else:
            z = y
        return z

    for rows in (1, 2, 3, 5):
        x = np.arange(rows * 4, dtype=F32).reshape(rows, 4)
        expected = x.reshape(rows * 2, 2) * (2.0 if rows > 2 else 1.0)
        check_script(doubled, [x], expected)


def test_dtype_casts_and_compares_like_numpy() -> None:
    @script()
    def like(x: DOUBLE["N"], i: INT64["N"]) -> DOUBLE["N"]:
        y = op.Cast(i, to=x.dtype)
        if x.dtype == np.float64:
            y = y + x
        return y

    x, i = np.array([0.5, 1.5], np.float64), np.array([1, 2], np.int64)
    check_script(like, [x, i], i.astype(np.float64) + x)


def test_whole_shape_as_a_tensor_is_one_shape_node() -> None:
    @script()
    def broadcast_to(y: FLOAT[1, "D"], x: FLOAT["N", "D"]) -> FLOAT["N", "D"]:
        return op.Expand(y, x.shape)

    y, x = np.arange(3, dtype=F32).reshape(1, 3), np.zeros((4, 3), F32)
    check_script(broadcast_to, [y, x], np.broadcast_to(y, (4, 3)))
    assert _op_types(broadcast_to) == ["Shape", "Expand"]


def test_one_size_of_a_tensor_of_unknown_rank() -> None:
    @script()
    def last(x: FLOAT[...]) -> FLOAT[...]:
        return op.Reshape(x, [-1, x.shape[-1]])

    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    check_script(last, [x], x.reshape(-1, 4))


def test_a_symbolic_size_is_no_python_int() -> None:
    @script()
    def repeat(x: FLOAT["N"]) -> FLOAT["N"]:
        for _i in range(int(x.shape[0])):
            x = x + 1.0
        return x

    with pytest.raises(DslTypeError, match="only known when the model runs") as caught:
        repeat.to_model_proto()
    assert caught.value.location.source_line.strip().startswith("for _i in range(int(x.shape[0]))")


def test_the_size_of_an_inferred_shape() -> None:
    @script()
    def flattened(x: FLOAT[2, 3, 4]) -> FLOAT[2, 12]:
        y = op.Reshape(x, [2, -1])
        return op.Reshape(x, [y.shape[0], y.shape[1]])

    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    check_script(flattened, [x], x.reshape(2, 12))
    assert "Shape" not in _op_types(flattened)


def test_sizes_after_an_if_and_an_op_inferred_by_onnx() -> None:
    @script()
    def regrouped(x: FLOAT[2, 8], c: BOOL, k: INT64[1]) -> FLOAT[2, 2, 2]:
        if c:
            y = x * 2.0
        else:
            y = op.Relu(x)
        top, _ = op.TopK(y, k, axis=1)
        rows, cols = y.shape  # both branches give [2, 8]
        return op.Reshape(top, [rows, cols // 4, top.shape[1] // 2])

    x = np.arange(16, dtype=F32).reshape(2, 8) - 8.0
    k = np.array([4], np.int64)
    for condition in (True, False):
        y = x * 2.0 if condition else np.maximum(x, 0.0)
        top = -np.sort(-y, axis=1)[:, :4]
        check_script(regrouped, [x, np.array(condition), k], top.reshape(2, 2, 2))
    assert "Shape" in _op_types(regrouped)  # TopK's k is a run-time value: its size is symbolic
