"""When a return annotation's rank is checked: one rule, eagerly and compiled.

A result is checked against the rank its annotation declares where the function's tensor
parameters all declare ranks and the call's arguments have them.  A parameter of any
rank (``FLOAT[...]``, torch_lib's ``TFloat``, no annotation), or a call from another
function passing another rank (which a call allows), leaves the rank to the body:
onnxscript's ``def isposinf(self: TFloat) -> BOOL`` gives a ``[3, 3]`` result for a
``[3, 3]`` input.  Oracles: numpy, onnxruntime on the checked model.
"""

from __future__ import annotations

from typing import TypeVar, Union

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl import BOOL, DOUBLE, FLOAT, INT64, ir, script
from dsl import opset18 as op
from dsl.errors import DslTypeError
from tests.helpers import check_script, export_and_run

TFloat = TypeVar("TFloat", bound=Union[FLOAT, DOUBLE])


@script()
def isposinf(self: TFloat) -> BOOL:
    self = op.Cast(self, to=FLOAT.dtype)
    return op.And(op.Greater(self, 0), op.IsInf(self))


@script()
def scalar_isinf(x: FLOAT) -> BOOL:
    return op.IsInf(x)


@script()
def calls_isposinf(x: FLOAT[...]):
    return isposinf(x)


@script()
def calls_scalar_isinf(x: FLOAT[3, 3]):
    return scalar_isinf(x)


@script()
def flat_isinf(x: FLOAT[3, 3]):
    found = op.Cast(scalar_isinf(x), to=FLOAT.dtype)  # [3, 3] here, whatever the annotation says
    return op.Reshape(found, [9])


@script()
def shape_of(x: TFloat) -> INT64:
    return op.Shape(x)


@script()
def any_rank_isinf(x: FLOAT[...]) -> BOOL:
    return op.IsInf(x)


@script()
def fixed_rank_isinf(x: FLOAT[3, 3]) -> BOOL:
    return op.IsInf(x)


@settings(max_examples=10, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=0, max_size=3), seed=st.integers(0, 2**16))
def test_a_typevar_parameter_leaves_the_result_rank_to_the_body(shape: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([np.inf, -np.inf, 1.0, -2.0], dtype=np.float32), size=shape)
    expected = np.isposinf(x)
    check_script(calls_isposinf, [x], expected)
    check_script(any_rank_isinf, [x], np.isinf(x))


def test_a_call_with_another_rank_than_declared_gets_the_rank_the_body_computes() -> None:
    x = np.array([[np.inf, 1.0, 0.0]] * 3, dtype=np.float32)
    check_script(calls_scalar_isinf, [x], np.isinf(x))


def test_the_result_of_such_a_call_is_not_taken_for_the_annotation_s_rank() -> None:
    x = np.array([[np.inf, 1.0, 0.0]] * 3, dtype=np.float32)
    check_script(flat_isinf, [x], np.isinf(x).astype(np.float32).reshape(9))


def test_a_rank_the_body_computes_whatever_the_inputs_is_its_own() -> None:
    """The compiler knows Shape's rank even for an input of any rank; it still checks it
    only where eager mode would (the parameter fixes no rank)."""
    for x in (np.ones((2, 3), np.float32), np.ones((4,), np.float32)):
        check_script(shape_of, [x], np.array(x.shape, dtype=np.int64),
                     io_types={"x": ir.TensorType(FLOAT.enum, (None,) * x.ndim)})


def test_the_outermost_call_and_a_model_keep_a_bare_type_a_scalar() -> None:
    x = np.ones((3, 3), dtype=np.float32)
    with pytest.raises(DslTypeError, match=r"declared FLOAT \(rank 0\), got shape \[3, 3\]"):
        scalar_isinf(x)
    model_input = scalar_isinf.to_model_proto().graph.input[0]
    assert len(model_input.type.tensor_type.shape.dim) == 0
    assert scalar_isinf(np.float32(np.inf)) == np.array(True)


def test_fixed_ranks_are_checked_against_the_return_annotation_both_ways() -> None:
    x = np.ones((3, 3), dtype=np.float32)
    with pytest.raises(DslTypeError, match="rank 2, not 0") as eager_error:
        fixed_rank_isinf(x)
    with pytest.raises(DslTypeError, match="rank 2, not 0") as compile_error:
        fixed_rank_isinf.to_model_proto()
    assert str(eager_error.value).splitlines()[0] == str(compile_error.value).splitlines()[0]


def test_an_unchecked_rank_is_not_written_into_the_model() -> None:
    """The model's output takes inference's rank, not the annotation's unchecked one."""
    x = np.array([[np.inf, 1.0]], dtype=np.float32)
    (found,) = export_and_run(any_rank_isinf, [x], io_types={"x": ir.TensorType(FLOAT.enum, (1, 2))})
    np.testing.assert_array_equal(found, np.isinf(x))
