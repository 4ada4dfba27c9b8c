"""Python evaluated while compiling: containers of tensors and weights, loops over Python
values, comprehensions, helpers compiled in place, ``is None``, ``assert``, ``len``.

Each construct runs eagerly and exported (onnxruntime, full checker) against numpy
written here (:func:`tests.helpers.check_script`); each refusal is a located DslError.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import onnx
import pytest

from dsl import (
    FLOAT,
    DslTypeError,
    StaticAssertionError,
    UnsupportedSyntaxError,
    initializer,
    script,
)
from dsl import opset18 as op
from tests.helpers import check_script

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W_ARRAYS = [RNG.standard_normal((4, 4)).astype(np.float32) for _ in range(3)]
B_ARRAYS = [RNG.standard_normal(4).astype(np.float32) for _ in range(3)]
LAYERS = [{"w": initializer(w, f"layers.{i}.w"), "b": initializer(b, f"layers.{i}.b")}
          for i, (w, b) in enumerate(zip(W_ARRAYS, B_ARRAYS))]


@dataclass
class Norm:
    scale: object
    eps: float


NORM = Norm(initializer(np.full(4, 1.5, np.float32), "norm.scale"), 1e-5)
SETTINGS = SimpleNamespace(heads=2, bias=initializer(np.arange(4, dtype=np.float32), "settings.bias"))


def numpy_layers(x: np.ndarray, count: int = 3) -> np.ndarray:
    for w, b in list(zip(W_ARRAYS, B_ARRAYS))[:count]:
        x = np.maximum(x @ w + b, 0)
    return x


def linear(x, layer):  # a plain helper: compiled in place when called with tensors
    return op.MatMul(x, layer["w"]) + layer["b"]


def block(x, layer, activation=True):
    y = linear(x, layer)
    return op.Relu(y) if activation else y


def split_pair(x):
    return op.Neg(x), x * 2.0


@script()
def loop_over_layers(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    for layer in LAYERS:
        x = block(x, layer)
    return x


@script()
def enumerate_zip_reversed(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    total = x
    for i, (layer, w) in enumerate(zip(LAYERS, reversed(LAYERS))):
        total = total + op.MatMul(x, layer["w"]) * float(i) - w["b"]
    return total


@script()
def range_indexing_a_list(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    for i in range(len(LAYERS)):
        x = block(x, LAYERS[i])
    return x


@script()
def comprehension_and_star(x: FLOAT["N", 4]) -> FLOAT["N", 12]:
    parts = [linear(x, layer) for layer in LAYERS if layer is not None]
    assert len(parts) == 3, "three layers"
    return op.Concat(*parts, axis=1)


@script()
def dataclass_and_namespace(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    scaled = x * NORM.scale + SETTINGS.bias
    return scaled / (1.0 + NORM.eps * SETTINGS.heads)


@script()
def dict_built_in_body(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    found = {f"out{i}": op.Relu(x + float(i)) for i in range(2)}
    other = {"a": found["out0"], **found}
    return other["a"] + other["out1"]


@script()
def helper_tuple(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    negative, doubled = split_pair(x)
    pair = split_pair(x)
    return negative + doubled + pair[1]


@script()
def optional_bias(x: FLOAT["N", 4], bias: FLOAT[4] | None = None) -> FLOAT["N", 4]:
    y = op.Relu(x)
    if bias is not None:
        y = y + bias
    return y


@script()
def calls_optional_with_none(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    return optional_bias(x, None) * 2.0


@script()
def split_length(x: FLOAT["N", 4]) -> FLOAT["N", 2]:
    parts = op.Split(x, num_outputs=2, axis=1)
    total = parts[0]
    for index in range(1, len(parts)):
        total = total + parts[index]
    return total


@script()
def collect_then_sum(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    outputs = []
    for layer in LAYERS[:2]:
        x = block(x, layer)
        outputs.append(x)
    return op.Sum(*outputs) + sum(outputs) + sum([x], 1.0)


@script()
def static_loop_stays_a_loop(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    for _ in range(3):
        x = x + 1.0
    return x


def test_loop_over_a_list_of_weight_dicts_unrolls_with_named_initializers() -> None:
    check_script(loop_over_layers, [X], numpy_layers(X))
    model = loop_over_layers.to_model_proto()
    names = sorted(i.name for i in model.graph.initializer)
    assert names == sorted(f"layers.{i}.{k}" for i in range(3) for k in "wb")
    assert [n.op_type for n in model.graph.node].count("MatMul") == 3


def test_enumerate_zip_reversed() -> None:
    expected = X.copy()
    for i, (w, b) in enumerate(zip(W_ARRAYS, reversed(B_ARRAYS))):
        expected = expected + (X @ w) * float(i) - b
    check_script(enumerate_zip_reversed, [X], expected, rtol=1e-5, atol=1e-5)


def test_range_over_a_python_list_unrolls_and_plain_range_stays_a_loop() -> None:
    check_script(range_indexing_a_list, [X], numpy_layers(X))
    assert "Loop" not in [n.op_type for n in range_indexing_a_list.to_model_proto().graph.node]
    check_script(static_loop_stays_a_loop, [X], X + 3.0)
    assert "Loop" in [n.op_type for n in static_loop_stays_a_loop.to_model_proto().graph.node]


def test_comprehension_starred_call_and_assert() -> None:
    expected = np.concatenate([X @ w + b for w, b in zip(W_ARRAYS, B_ARRAYS)], axis=1)
    check_script(comprehension_and_star, [X], expected, atol=1e-5)


def test_dataclass_and_namespace_weights() -> None:
    expected = (X * 1.5 + np.arange(4, dtype=np.float32)) / (1.0 + 1e-5 * 2)
    check_script(dataclass_and_namespace, [X], expected)


def test_dicts_and_fstrings_built_in_the_body() -> None:
    check_script(dict_built_in_body, [X], np.maximum(X, 0) * 2 + 0 + np.maximum(X + 1, 0) - np.maximum(X, 0))


def test_helper_returning_a_tuple() -> None:
    check_script(helper_tuple, [X], -X + 2 * X + 2 * X)


def test_is_none_on_an_optional_input_and_a_call_passing_none() -> None:
    bias = np.arange(4, dtype=np.float32)
    check_script(optional_bias, [X, bias], np.maximum(X, 0) + bias)
    check_script(calls_optional_with_none, [X], np.maximum(X, 0) * 2)


def test_len_of_split_outputs() -> None:
    check_script(split_length, [X], X[:, :2] + X[:, 2:])


def test_list_grown_in_an_unrolled_loop() -> None:
    two = numpy_layers(X, 1) + numpy_layers(X, 2)
    check_script(collect_then_sum, [X], two + two + numpy_layers(X, 2) + 1.0, atol=1e-5)


def test_initializer_operators_run_eagerly() -> None:
    weight = initializer(np.arange(4, dtype=np.float32), "w")
    np.testing.assert_array_equal(np.asarray(weight * 2.0), np.arange(4) * 2.0)
    np.testing.assert_array_equal(np.asarray(1.0 - weight), 1.0 - np.arange(4))
    np.testing.assert_array_equal(np.asarray(weight[1:3]), [1.0, 2.0])


def _compile(tmp_path, text: str, name: str = "f"):
    import importlib.util
    import sys

    path = tmp_path / f"static_{abs(hash(text))}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_nested_script_under_future_annotations_sees_enclosing_names(tmp_path) -> None:
    make = _compile(tmp_path, """
        from __future__ import annotations
        from dsl import FLOAT, script, opset18 as op

        def make():
            Vec = FLOAT["N"]
            scale = 3.0

            @script()
            def triple(x: Vec) -> Vec:
                return x * scale
            return triple
    """, "make")
    triple = make()
    x = np.arange(3, dtype=np.float32)
    check_script(triple, [x], x * 3.0)


def test_python_operators_only_export_at_the_imported_opset(tmp_path) -> None:
    matmul = _compile(tmp_path, """
        from dsl import FLOAT, script, opset18 as op

        @script()
        def f(x: FLOAT[2, 2], w: FLOAT[2, 2]) -> FLOAT[2, 2]:
            return x @ w
    """)
    model = matmul.to_model_proto()
    assert {o.domain: o.version for o in model.opset_import}[""] == 18
    onnx.checker.check_model(model, full_check=True)


@pytest.mark.parametrize(("error", "text", "marker"), [
    (StaticAssertionError, """
        from dsl import FLOAT, script, opset18 as op
        SIZES = [1, 2]

        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            assert len(SIZES) == 3, "three sizes"
            return x
    """, "assert len"),
    (UnsupportedSyntaxError, """
        from dsl import FLOAT, script, opset18 as op
        def grow(parts, x):
            parts.append(x)

        @script()
        def f(x: FLOAT["N"], n: FLOAT[""]) -> FLOAT["N"]:
            parts = []
            if op.ReduceMax(x) > n:
                parts.append(x)
            return x
    """, "parts.append(x)"),
    (DslTypeError, """
        from dsl import FLOAT, INT64, script, opset18 as op
        WS = [1.0, 2.0]

        @script()
        def f(x: FLOAT["N"], i: INT64[""]) -> FLOAT["N"]:
            ws = [x, x]
            return ws[i]
    """, "ws[i]"),
    (DslTypeError, """
        from dsl import FLOAT, script, opset18 as op

        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return x * len(x)
    """, "len(x)"),
    (DslTypeError, """
        from dsl import FLOAT, script, opset18 as op

        def helper(x, y):
            return x + y

        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return helper(x)
    """, "helper(x)"),
])
def test_refusals_point_at_the_user_line(tmp_path, error, text, marker) -> None:
    function = _compile(tmp_path, text)
    with pytest.raises(error) as caught:
        function.to_model_proto()
    location = caught.value.location
    assert location is not None and marker in location.source_line, str(caught.value)
    assert caught.value.hint, str(caught.value)


def test_helper_errors_point_into_the_helper(tmp_path) -> None:
    function = _compile(tmp_path, """
        from dsl import FLOAT, script, opset18 as op

        def helper(x):
            return op.Relu(x, x)

        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return helper(x)
    """)
    with pytest.raises(Exception) as caught:
        function.to_model_proto()
    assert "op.Relu(x, x)" in caught.value.location.source_line


@script()
def gelu(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    return 0.5 * x * (1.0 + op.Erf(x / 1.4142135623730951))


def mlp(x, layer):  # a helper calling a @script function: a function call in the model
    return gelu(linear(x, layer))


class Residual:
    """A user object whose method is a helper (compiled in place with ``self`` bound)."""

    def __init__(self, layer: dict) -> None:
        self.layer = layer

    def __call__(self, x):
        return x + mlp(x, self.layer)

    def apply(self, x):
        return self(x)


RESIDUALS = [Residual(layer) for layer in LAYERS[:2]]


@script()
def helper_calls_script(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    for block_object in RESIDUALS:
        x = block_object.apply(x)
    return x


def test_helpers_call_script_functions_and_methods_are_helpers() -> None:
    from math import erf

    vector_erf = np.vectorize(erf)
    expected = X
    for w, b in zip(W_ARRAYS[:2], B_ARRAYS[:2]):
        y = expected @ w + b
        expected = expected + (0.5 * y * (1.0 + vector_erf(y / np.sqrt(2.0)))).astype(np.float32)
    check_script(helper_calls_script, [X], expected.astype(np.float32), rtol=1e-4, atol=1e-5)
    model = helper_calls_script.to_model_proto()
    assert [n.op_type for n in model.graph.node].count("gelu") == 2


SHIFTS = [1.0, 2.0, 3.0]


@script()
def while_inside_an_unrolled_range(x: FLOAT[3]) -> FLOAT[3]:
    for i in range(3):
        y = x
        while op.ReduceMax(y) > 100.0:
            y = y / 2.0
        x = y + SHIFTS[i]
    return x


def test_a_range_loop_retried_unrolled_keeps_its_inner_while_loops() -> None:
    x = np.array([150.0, 1.0, 2.0], np.float32)
    expected = x.copy()
    for shift in SHIFTS:
        while expected.max() > 100.0:
            expected = expected / 2.0
        expected = expected + shift
    check_script(while_inside_an_unrolled_range, [x], expected)


MISSING_NORM = None


@script()
def static_and_or(x: FLOAT["N", 4]) -> FLOAT["N", 4]:
    scale = (MISSING_NORM is not None and 2.0) or 3.0
    other = (NORM is not None and 2.0) or 3.0
    if MISSING_NORM is not None and MISSING_NORM.eps > 0:  # short-circuits: .eps of None is never read
        x = x + 1.0
    return x * scale * other


def test_static_and_or_follow_python() -> None:
    check_script(static_and_or, [X], X * 6.0)
