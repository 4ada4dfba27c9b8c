"""Planted mistakes: mypy and pyright each flag every line marked ``# mistake``, and no other."""

from __future__ import annotations

from typing import Annotated

import numpy as np

from dsl import FLOAT, INT64, Tensor, script
from dsl import opset18 as op

Rows = Annotated[Tensor, FLOAT["B", "D"]]
Count = Annotated[Tensor, INT64]


@script()
def layer(x: Rows, k: Count, alpha: float = 0.5) -> Rows:
    a = op.Softmaxx(x)  # mistake: unknown op
    b = op.Softmax(x, axsi=1)  # mistake: misspelt keyword
    c = op.Relu(x, x)  # mistake: too many inputs
    d = op.Reshape(x)  # mistake: too few inputs
    e = op.LeakyRelu(x, alpha="big")  # mistake: attribute of the wrong Python type
    f = op.Softmax(x, axis=1.5)  # mistake: a float for an int attribute
    g = op.Cast(x)  # mistake: the required attribute `to` left out
    h = op.Cast(x, to="float")  # mistake: an element type as a string
    i = op.Sqrt("four")  # mistake: a string where only numbers are allowed
    j = op.BitwiseAnd(k, 1.5)  # mistake: a float where only integers are allowed
    m = op.Where(1, x, x)  # mistake: an int where only booleans are allowed
    n = op.Attention(x, x, x)  # mistake: an op opset 18 does not have yet
    return a + b + c + d + e + f + g + h + i + j + m + n


proto = layer.to_model_protoo()  # mistake: misspelt method of a scripted function
x = np.ones((2, 3), np.float32)
layer(x, np.array(1), alhpa=0.1)  # mistake: misspelt keyword in an eager call
layer(x, np.array(1), 0.1, 2)  # mistake: too many arguments in an eager call
layer(x)  # mistake: an input left out of an eager call
layer(x, np.array(1), alpha="big")  # mistake: an attribute of the wrong type in an eager call
op.BitwiseAnd(x, np.array([1, 2, 3]))  # mistake: a float32 array where only integers are allowed
op.Where(x, x, x)  # mistake: a float32 array as the condition, which must be bool
op.Gather(x, np.ones(2))  # mistake: float64 indices
