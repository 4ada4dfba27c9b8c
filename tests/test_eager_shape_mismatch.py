"""The shape diagnosis of eager failures agrees with numpy on which shapes fit together."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from eager.shape_mismatch import disagreement

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def _numpy_accepts(function, first: tuple[int, ...], second: tuple[int, ...]) -> bool:
    try:
        function(np.zeros(first), np.zeros(second))
    except ValueError:  # (numpy's refusal of these shapes is the oracle's answer)
        return False
    return True


@given(shapes, shapes)
def test_broadcasting_disagreement_iff_numpy_refuses(first: tuple[int, ...], second: tuple[int, ...]) -> None:
    found = disagreement("Add", [first, second], ["a", "b"])
    assert (found is None) == _numpy_accepts(np.add, first, second)
    if found is not None:
        assert f"a: [{', '.join(map(str, first))}]" in found[0]


@given(shapes.filter(lambda s: len(s) >= 2), shapes.filter(lambda s: len(s) >= 2))
def test_matmul_disagreement_iff_numpy_refuses(first: tuple[int, ...], second: tuple[int, ...]) -> None:
    found = disagreement("MatMul", [first, second], ["x", "w"])
    assert (found is None) == _numpy_accepts(np.matmul, first, second)


def test_the_axis_that_disagrees_is_named() -> None:
    message, hint = disagreement("Mul", [(2, 3, 5), (4, 5)], ["x", "scale"]) or ("", "")
    assert message == "Mul: x: [2, 3, 5] vs scale: [4, 5]: axis -2 is 3 in x and 4 in scale"
    assert "equal or one of them 1" in hint
    assert disagreement("Relu", [(2, 3)], ["x"]) is None  # (not a shape rule this module knows)
