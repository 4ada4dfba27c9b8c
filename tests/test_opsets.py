"""Opsets are checked against onnx.defs schemas, and their errors are DslErrors."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import onnxruntime
import pytest

import dsl
from dsl import ir, opsets, types
from dsl.errors import DslError, DslTypeError, OpAttributeError, OpCallError, UnknownOpError
from tests.runtime_probes import onnxruntime_refusals


def test_module_level_opsets_are_shared_and_lazy() -> None:
    assert dsl.opset18 is opsets.opset18 is opsets.get_opset("", 18)
    assert dsl.opset18.version == 18 and dsl.opset18.domain == ""
    assert opsets.ai_onnx_ml3.domain == "ai.onnx.ml"
    assert opsets.get_opset("ai.onnx", 13) is opsets.opset13


def test_default_opset_is_what_onnxruntime_loads() -> None:
    version = dsl.opset.version
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", 1, [1])],
        [onnx.helper.make_tensor_value_info("y", 1, [1])],
    )
    from dsl.onnxruntime_limits import max_ir_version

    def loads(opset: int) -> bool:
        model = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=max_ir_version()
        )
        try:
            onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except onnxruntime_refusals():
            return False
        return True

    assert loads(version)
    if version < onnx.defs.onnx_opset_version():
        assert not loads(version + 1)


def test_ir_version_is_the_newest_onnxruntime_loads() -> None:
    from dsl.onnxruntime_limits import max_ir_version

    def loads(ir_version: int) -> bool:
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
            [onnx.helper.make_tensor_value_info("x", 1, [1])], [onnx.helper.make_tensor_value_info("y", 1, [1])],
        )
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=ir_version)
        try:
            onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except onnxruntime_refusals():  # any refusal: onnxruntime does not load this IR version
            return False
        return True

    assert loads(max_ir_version())
    if max_ir_version() < onnx.IR_VERSION:
        assert not loads(max_ir_version() + 1)


def test_loadable_lowers_only_an_ir_version_onnxruntime_refuses() -> None:
    from dsl.onnxruntime_limits import loadable, max_ir_version

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", 1, [1])], [onnx.helper.make_tensor_value_info("y", 1, [1])],
    )
    newest = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=onnx.IR_VERSION)
    lowered = loadable(newest)
    assert lowered.ir_version == min(onnx.IR_VERSION, max_ir_version())
    assert newest.ir_version == onnx.IR_VERSION  # the caller's model is left alone
    session = onnxruntime.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.array([-1.0], np.float32)})[0].tolist() == [0.0]
    old = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8)
    assert loadable(old) is old


def test_version_beyond_onnx_is_refused() -> None:
    with pytest.raises(AttributeError, match="up to version"):
        opsets.__getattr__(f"opset{onnx.defs.onnx_opset_version() + 1}")


def test_op_is_bound_to_newest_schema_not_after_version() -> None:
    relu = dsl.opset18.Relu
    assert relu.since_version == onnx.defs.get_schema("Relu", 18).since_version
    assert dsl.opset18.Relu is relu  # cached
    assert "Relu" in dir(dsl.opset18)


def test_unknown_op_is_dsl_error_and_attribute_error() -> None:
    with pytest.raises(UnknownOpError) as info:
        dsl.opset18.Relux
    assert "did you mean Relu" in str(info.value)
    assert isinstance(info.value, AttributeError) and isinstance(info.value, DslError)
    assert not hasattr(dsl.opset18, "Relux")


def test_op_newer_than_opset_names_the_opset_it_needs() -> None:
    with pytest.raises(UnknownOpError, match="from opset 14"):
        opsets.opset13.HardSwish


def test_custom_domain_accepts_anything() -> None:
    custom = dsl.Opset("com.example", 1)
    op = custom.MyOp
    op.check_call(5, {"anything": 1})
    assert op.make_attr("alpha", 0.5).kind == ir.AttrKind.FLOAT
    assert op.make_attr("sizes", [1, 2]).kind == ir.AttrKind.INTS
    assert op.output_elem_types([1]) == [None]


@pytest.mark.parametrize(
    ("op_name", "count", "message"),
    [("Relu", 2, "takes 1 input, got 2"), ("Add", 1, "takes 2 inputs, got 1"), ("Concat", 0, "at least 1")],
)
def test_input_count_is_checked(op_name: str, count: int, message: str) -> None:
    with pytest.raises(OpCallError, match=message):
        dsl.opset18.get_op(op_name).check_inputs(count)


def test_attributes_are_checked_and_converted() -> None:
    conv = dsl.opset18.Conv
    assert conv.make_attr("pads", (1, 1, 1, 1)).value == [1, 1, 1, 1]
    assert conv.make_attr("group", np.int64(2)).value == 2
    with pytest.raises(OpAttributeError, match="no attribute 'pad'") as info:
        conv.make_attr("pad", [1])
    assert "did you mean pads" in str(info.value)
    with pytest.raises(OpAttributeError, match="must be a list of ints"):
        conv.make_attr("pads", 1.5)
    with pytest.raises(OpAttributeError, match="input of Conv"):
        conv.make_attr("W", 1)
    leaky = dsl.opset18.LeakyRelu.make_attr("alpha", 1)
    assert leaky.kind == ir.AttrKind.FLOAT and leaky.value == 1.0
    with pytest.raises(OpAttributeError, match="requires attribute"):
        dsl.opset18.Cast.check_call(1, set())
    assert dsl.opset18.Cast.make_attr("to", types.FLOAT16).value == types.FLOAT16.enum


def test_tensor_attribute_keeps_numpy_dtype() -> None:
    attr = dsl.opset18.Constant.make_attr("value", np.array([1, 2], dtype=np.int8))
    assert attr.value.elem_type == types.INT8.enum
    assert attr.value.array.tolist() == [1, 2]
    python = dsl.opset18.Constant.make_attr("value", 1.5)
    assert python.value.elem_type == types.FLOAT.enum


def test_output_element_types_follow_constraints() -> None:
    op = dsl.opset18
    assert op.Add.output_elem_types([types.FLOAT16.enum, None]) == [types.FLOAT16.enum]
    assert op.Shape.output_elem_types([types.FLOAT.enum]) == [types.INT64.enum]
    assert op.Equal.output_elem_types([types.FLOAT.enum, types.FLOAT.enum]) == [types.BOOL.enum]
    cast_to = {"to": ir.Attr("to", ir.AttrKind.INT, types.DOUBLE.enum)}
    assert op.Cast.output_elem_types([types.FLOAT.enum], cast_to) == [types.DOUBLE.enum]
    assert op.Relu.output_elem_types([None]) == [None]


def test_input_types_are_checked_against_constraints() -> None:
    with pytest.raises(DslTypeError, match="same element type"):
        dsl.opset18.Add.check_input_types([types.FLOAT.enum, types.INT64.enum])
    with pytest.raises(DslTypeError, match="does not allow"):
        dsl.opset18.Relu.check_input_types([types.STRING.enum])
    dsl.opset18.Add.check_input_types([types.FLOAT.enum, None])


def test_default_output_count_skips_optional_and_variadic() -> None:
    assert dsl.opset18.TopK.default_output_count() == 2
    assert dsl.opset18.Relu.default_output_count() == 1
    assert dsl.opset18.BatchNormalization.default_output_count() == 1
