"""``typing.Annotated`` in @script signatures: ``Annotated[Tensor, FLOAT["B", 3]]`` is that
tensor type, ``Annotated[T, other metadata]`` is ``T``.

Oracles: the value infos ``onnx.helper`` builds for the same types, numpy for the values,
onnxruntime running the exported model.
"""

from __future__ import annotations

import typing
from typing import Annotated

import numpy as np
import onnx
import onnx.helper
import onnxruntime
import pytest

from dsl import FLOAT, INT64, DslError, Tensor, script
from dsl import opset18 as op


def _run(model: onnx.ModelProto, **inputs: np.ndarray) -> list[np.ndarray]:
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


@script()
def scaled(x: Annotated[Tensor, FLOAT["B", 3]], scale: Annotated[float, "must be positive"] = 1.5) -> Annotated[
    Tensor, FLOAT["B", 3], "the scaled rows"
]:
    return op.Relu(x) * scale


def test_annotated_tensor_types_are_the_model_inputs_and_outputs() -> None:
    model = scaled.to_model_proto()
    expected = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", 3])
    assert model.graph.input[0].type == expected.type
    assert model.graph.output[0].type.tensor_type.shape == expected.type.tensor_type.shape
    x = np.array([[-1.0, 2.0, 3.0], [4.0, -5.0, 0.5]], np.float32)
    np.testing.assert_allclose(_run(model, x=x)[0], np.maximum(x, 0) * 1.5, rtol=1e-6)


def test_annotated_float_is_a_float_attribute_whose_metadata_is_ignored() -> None:
    function = scaled.to_function_proto()
    assert list(function.input) == ["x"]
    (attribute,) = function.attribute_proto
    assert (attribute.name, attribute.type, attribute.f) == ("scale", onnx.AttributeProto.FLOAT, 1.5)
    x = np.array([[-1.0, 2.0, 3.0]], np.float32)
    np.testing.assert_allclose(scaled(x, scale=4.0), np.maximum(x, 0) * 4.0, rtol=1e-6)
    model = scaled.to_model_proto(attributes={"scale": 0.25})
    np.testing.assert_allclose(_run(model, x=x)[0], np.maximum(x, 0) * 0.25, rtol=1e-6)


def test_annotated_objects_and_other_metadata_without_future_annotations(tmp_path: typing.Any) -> None:
    path = tmp_path / "annotated_objects.py"
    path.write_text(
        "from typing import Annotated\n"
        "from dsl import FLOAT, INT64, Tensor, script, opset18 as op\n"
        "@script()\n"
        "def count(x: Annotated[Tensor, INT64[2]], y: Annotated[FLOAT[...], 'documentation']) -> Annotated[\n"
        "        Tensor, 'anything']:\n"
        "    return op.Cast(x, to=FLOAT) + y\n",
        encoding="utf-8",
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("annotated_objects", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.count.to_model_proto(io_types={"y": FLOAT[2]})
    assert model.graph.input[0].type == onnx.helper.make_tensor_type_proto(onnx.TensorProto.INT64, [2])
    x, y = np.array([1, 2], np.int64), np.array([0.5, 0.25], np.float32)
    np.testing.assert_allclose(_run(model, x=x, y=y)[0], x.astype(np.float32) + y)


def test_two_tensor_types_in_one_annotated_is_an_error_at_the_parameter() -> None:
    @script()
    def ambiguous(x: Annotated[Tensor, FLOAT[2], INT64[2]]) -> Annotated[Tensor, FLOAT[2]]:
        return x

    with pytest.raises(DslError) as caught:
        ambiguous.to_model_proto()
    assert "names 2 tensor types" in str(caught.value)
    assert "test_frontend_annotated.py" in str(caught.value)


@script()
def heads_split(x: Annotated[Tensor, FLOAT[2, 8]], heads: Annotated[int, "a divisor of 8"] | None = 4) -> (
    Annotated[Tensor, FLOAT[...]]
):
    return op.Reshape(x, [0, heads, -1])


def test_annotated_inside_optional_is_still_an_attribute() -> None:
    (attribute,) = heads_split.to_function_proto().attribute_proto
    assert (attribute.name, attribute.type, attribute.i) == ("heads", onnx.AttributeProto.INT, 4)
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    model = heads_split.to_model_proto(attributes={"heads": 2})
    np.testing.assert_array_equal(_run(model, x=x)[0], x.reshape(2, 2, 4))
