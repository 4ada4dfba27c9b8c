"""dsl.frontend.callee_shapes: a called @script function's return annotation checked with
the caller's shapes, as eager mode checks it.  Oracles: eager mode on the same call (it
refuses exactly when the compiled call is refused, with the same message and line) and
onnxruntime on the compiled model (the same values, under output shapes that hold)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime
import pytest

import dsl
from dsl import BOOL, FLOAT
from dsl import opset18 as op
from dsl.errors import DslError


@dsl.script()
def is_nan(x: FLOAT[...]) -> BOOL:
    return op.IsNaN(x)


@dsl.script()
def first_row(x: FLOAT[...]) -> FLOAT["N"]:
    row = op.Gather(x, op.Constant(value_int=0), axis=0)
    return row


@dsl.script()
def with_batch_axis(x: FLOAT[...]) -> FLOAT["A", "B"]:
    return op.Unsqueeze(x, op.Constant(value_ints=[0]))


@dsl.script()
def batch_of_matrix(x: FLOAT[3, 4]):
    return with_batch_axis(x)


@dsl.script()
def nan_mask(x: FLOAT[3, 3]):
    return is_nan(x)


@dsl.script()
def row_of_matrix(x: FLOAT[3, 4]):
    return first_row(x)


@dsl.script()
def row_of_cube(x: FLOAT[2, 3, 4]):
    return first_row(x)


def _outcome(call: Any) -> tuple[str, str, int] | None:
    try:
        call()
    except DslError as error:
        return error.message, error.hint or "", error.location.line
    return None


@pytest.mark.parametrize(("caller", "shape", "words"), [
    (nan_mask, (3, 3), "output 0 is BOOL[3, 3] but the annotation says BOOL: rank 2, not 0"),
    (row_of_cube, (2, 3, 4), "output 0 (row) is FLOAT[3, 4] but the annotation says FLOAT[N]: rank 2, not 1"),
    (row_of_matrix, (3, 4), None),
    (batch_of_matrix, (3, 4), "output 0 is FLOAT[1, 3, 4] but the annotation says FLOAT[A, B]: rank 3, not 2"),
], ids=["rank-0-annotation", "named-result", "fits", "axes-from-a-constant"])
def test_a_callee_annotation_is_refused_compiled_exactly_when_eagerly(caller: Any, shape: tuple[int, ...],
                                                                      words: str | None) -> None:
    array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    eager = _outcome(lambda: caller(array))
    compiled = _outcome(caller.to_model_proto)
    assert eager == compiled
    if words is None:
        return
    assert compiled is not None and compiled[0].startswith(words)


def test_the_callee_error_is_at_the_callee_return() -> None:
    with pytest.raises(DslError) as caught:
        row_of_cube.to_model_proto()
    assert caught.value.location.source_line.strip() == "return row"


def test_a_fitting_call_compiles_to_the_eager_values_with_the_carried_shape() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = row_of_matrix.to_model_proto()
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    [got] = session.run(None, {session.get_inputs()[0].name: array})
    np.testing.assert_array_equal(got, np.asarray(row_of_matrix(array)))
    declared = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert declared == list(got.shape) == [4]
