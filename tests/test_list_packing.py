"""A list of integers and integer tensors where an op takes one tensor (``op.Tile(x,
[a, b])``, ``op.Reshape(x, [b, s, n, -1])``): packed into one 1-D tensor eagerly and
compiled alike (dsl/list_packing.py), and refused alike where it cannot be packed.
Oracles: numpy, onnxruntime on the fully checked model."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl import FLOAT, INT32, INT64, script
from dsl import opset18 as op
from dsl.errors import DslTypeError
from tests.helpers import check_script


def repeat(self, repeats):  # type: ignore[no-untyped-def]  (a helper compiled in place, as torch_lib's)
    """torch_lib's aten_repeat, as a plain Python helper."""
    if len(repeats) == 0:
        return self
    self_expanded = op.Expand(self, [1] * len(repeats))
    return op.Tile(self_expanded, repeats)


@script()
def tile_scalars(x: FLOAT[2, 3], a: INT64, b: INT64):
    return repeat(x, [a, b])


@script()
def tile_vectors(x: FLOAT[2, 3], a: INT64[1], b: INT64[1]):
    return op.Tile(x, [a, b])


@script()
def tile_mixed(x: FLOAT[2, 3], a: INT64[1]):
    return repeat(x, [2, a, 1])


@script()
def tile_int32(x: FLOAT[2, 3], a: INT32, b: INT32[1]):
    return op.Tile(x, op.Cast([a, b], to=INT64.dtype))


@settings(max_examples=8, deadline=None)
@given(a=st.integers(1, 3), b=st.integers(1, 3))
def test_a_list_of_integer_tensors_is_one_tensor(a: int, b: int) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_script(tile_scalars, [x, np.array(a), np.array(b)], np.tile(x, (a, b)))
    check_script(tile_vectors, [x, np.array([a]), np.array([b])], np.tile(x, (a, b)))
    check_script(tile_mixed, [x, np.array([a])], np.tile(x, (2, a, 1)))
    check_script(tile_int32, [x, np.array(a, np.int32), np.array([b], np.int32)], np.tile(x, (a, b)))


@script()
def split_heads(x: FLOAT["B", "S", 12], n: INT64):
    b, s, _ = x.shape
    return op.Reshape(x, [b, s, n, -1])


@pytest.mark.parametrize("heads", [1, 2, 3, 4])
def test_symbolic_sizes_and_a_tensor_in_one_list(heads: int) -> None:
    x = np.arange(2 * 5 * 12, dtype=np.float32).reshape(2, 5, 12)
    check_script(split_heads, [x, np.array(heads)], x.reshape(2, 5, heads, -1))


@script()
def tile_matrix(x: FLOAT[2, 3], a: INT64[2, 1]):
    return op.Tile(x, [a, 1])


@script()
def reshape_by_float(x: FLOAT[2, 3], a: FLOAT[1]):
    return op.Reshape(x, [a, -1])


@script()
def tile_two_types(x: FLOAT[2, 3], a: INT64[1], b: INT32[1]):
    return op.Tile(x, [a, b])


@script()
def tile_half(x: FLOAT[2, 3], a: INT64[1]):
    return op.Tile(x, [a, 0.5])


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0].split("error: ", 1)[1]


@pytest.mark.parametrize("function, arguments, message", [
    (tile_matrix, [np.array([[1], [2]])], "from numbers, scalars and 1-D tensors, but a is INT64[2, 1] (rank 2)"),
    (reshape_by_float, [np.array([2.0], np.float32)], "a list of tensors is not a tensor: a is FLOAT[1]"),
    (tile_two_types, [np.array([1]), np.array([2], np.int32)], "the tensors of a list are INT32 and INT64"),
    (tile_half, [np.array([1])], "a list of integer tensors holds 0.5"),
])
def test_what_does_not_pack_is_refused_with_one_message_both_ways(function: Any, arguments: list[Any],
                                                                   message: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(DslTypeError, match=re.escape(message)) as eager_error:
        function(x, *arguments)
    with pytest.raises(DslTypeError, match=re.escape(message)) as compile_error:
        function.to_model_proto()
    assert _first_line(eager_error.value) == _first_line(compile_error.value)
    assert eager_error.value.location.line == compile_error.value.location.line
