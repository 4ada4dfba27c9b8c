"""Code written for onnxscript, with its import changed to dsl, compiles, exports and runs.

Each test writes what onnxscript's documentation and test models write (a
``TensorProto`` as ``value=``, inputs passed by keyword, ``to=FLOAT.dtype``,
torch_lib's ``TypeVar`` annotations, ``@script(opset, ir_version=...)``), exports it
(full ``onnx.checker``), runs the model in onnxruntime and the function eagerly, and
compares both with numpy.  The last group keeps the cases where dsl is stricter on
purpose, because what onnxscript accepts there is not valid ONNX.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Optional, TypeVar, Union

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import onnx.reference
import pytest
from onnx import TensorProto

from dsl import (
    BOOL,
    DOUBLE,
    FLOAT,
    FLOAT16,
    INT64,
    STRING,
    ConversionError,
    DslError,
    DslTypeError,
    Opset,
    TensorType,
    UnsupportedSyntaxError,
    export_onnx_lib,
    graph,
    opset13,
    opset18,
    script,
)
from dsl import opset18 as op
from tests.helpers import check_script, export_and_run, run_model

F32 = np.float32


# ------------------------------------------------------------- onnxscript's own examples


def test_onnxscript_readme_hardmax() -> None:
    from dsl import opset15

    @script()
    def hardmax(X: FLOAT[...], axis: int = 0) -> FLOAT[...]:
        argmax = opset15.ArgMax(X, axis=axis, keepdims=False)
        xshape = opset15.Shape(X, start=axis)
        zero = opset15.Constant(value_ints=[0])
        depth = opset15.GatherElements(xshape, zero)
        empty_shape = opset15.Constant(value_ints=[])
        depth = opset15.Reshape(depth, empty_shape)
        values = opset15.Constant(value_ints=[0, 1])
        cast_values = opset15.CastLike(values, X)
        return opset15.OneHot(argmax, depth, cast_values, axis=axis)

    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], F32)
    for axis in (0, 1):
        expected = (x == x.max(axis=axis, keepdims=True)).astype(F32)
        check_script(hardmax, [x], expected, attributes={"axis": axis})


def test_onnxscript_docs_leaky_relu_with_a_tensor_constant() -> None:
    @script()
    def leaky_relu(X: FLOAT[...], alpha: float = 0.01) -> FLOAT[...]:
        zero = op.Constant(value=oh.make_tensor("zero", TensorProto.FLOAT, [1], [0]))
        return op.Where(X < zero, X * alpha, X)

    x = np.array([-2.0, 0.0, 3.0], F32)
    check_script(leaky_relu, [x], np.where(x < 0, x * F32(0.01), x))
    onnx.checker.check_function(leaky_relu.to_function_proto())


# ------------------------------------------------------------- 1. TensorProto attributes


def test_constant_takes_a_tensor_proto() -> None:
    @script()
    def shifted(x: FLOAT[2, 3]) -> FLOAT[2, 3]:
        bias = op.Constant(value=oh.make_tensor("bias", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]))
        return x + bias

    x = np.arange(6, dtype=F32).reshape(2, 3)
    check_script(shifted, [x], x + np.array([1, 2, 3], F32))


def test_tensor_proto_keeps_its_element_type_and_shape() -> None:
    proto = oh.make_tensor("k", TensorProto.INT64, [2, 2], [1, 2, 3, 4])

    @script()
    def constant() -> INT64[2, 2]:
        return op.Constant(value=proto)

    check_script(constant, [], np.array([[1, 2], [3, 4]], np.int64))


def test_tensor_proto_eagerly() -> None:
    got = op.Constant(value=oh.make_tensor("c", TensorProto.DOUBLE, [2], [0.5, -1.5]))
    assert got.dtype == np.float64 and got.tolist() == [0.5, -1.5]


def test_constant_of_shape_takes_a_tensor_proto() -> None:
    @script()
    def filled(shape: INT64[2]) -> FLOAT[None, None]:
        return op.ConstantOfShape(shape, value=oh.make_tensor("v", TensorProto.FLOAT, [1], [7.0]))

    check_script(filled, [np.array([2, 3], np.int64)], np.full((2, 3), 7.0, F32))


def test_sparse_tensor_proto_as_sparse_value() -> None:
    values = oh.make_tensor("values", TensorProto.FLOAT, [2], [5.0, 6.0])
    indices = oh.make_tensor("indices", TensorProto.INT64, [2], [1, 4])  # linear positions
    sparse = oh.make_sparse_tensor(values, indices, [2, 3])

    @script()
    def dense() -> FLOAT[2, 3]:
        return op.Constant(sparse_value=sparse)

    model = dense.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    written = model.graph.node[0].attribute[0].sparse_tensor
    for part in ("values", "indices"):
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(getattr(written, part)),
                                      onnx.numpy_helper.to_array(getattr(sparse, part)))
    got = run_model(model, [])[0]  # onnxruntime returns the sparse tensor itself
    assert list(got.dense_shape()) == [2, 3] and got.values().tolist() == [5.0, 6.0]


def test_a_tensor_proto_for_a_non_tensor_attribute_is_refused() -> None:
    @script()
    def wrong(x: FLOAT[2]) -> FLOAT[2]:
        return op.LeakyRelu(x, alpha=oh.make_tensor("a", TensorProto.FLOAT, [], [0.1]))

    with pytest.raises(DslError, match="alpha must be a float"):
        wrong.to_model_proto()


# ------------------------------------------------------------- 2. inputs by keyword


def test_inputs_by_keyword_compile_and_run() -> None:
    @script()
    def cut(x: FLOAT[4, 5]) -> FLOAT[None, None, None]:
        y = op.Unsqueeze(x, axes=[1])
        return op.Slice(y, starts=[1, 1], ends=[3, 4], axes=[0, 2])

    x = np.arange(20, dtype=F32).reshape(4, 5)
    check_script(cut, [x], x[1:3, None, 1:4])


def test_keyword_inputs_mix_with_positional_ones_and_skip_optional_inputs() -> None:
    @script()
    def stepped(x: FLOAT[6]) -> FLOAT[None]:
        return op.Slice(x, [0], ends=[6], steps=[2])   # axes (input 4) left out

    x = np.arange(6, dtype=F32)
    check_script(stepped, [x], x[::2])
    node = stepped.to_model_proto().graph.node[-1]
    assert node.op_type == "Slice" and node.input[3] == "" and len(node.input) == 5


def test_keyword_inputs_eagerly() -> None:
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(op.Unsqueeze(x, axes=[0]), x[None])
    np.testing.assert_array_equal(op.Slice(x, starts=[1], ends=[3], axes=[1]), x[:, 1:3])


def test_an_input_given_twice_or_a_required_one_skipped_is_an_error() -> None:
    @script()
    def twice(x: FLOAT[2]) -> FLOAT[None, 2]:
        return op.Unsqueeze(x, [0], axes=[0])

    with pytest.raises(DslError, match="got input 'axes' twice"):
        twice.to_model_proto()

    @script()
    def skipped(x: FLOAT[4]) -> FLOAT[None]:
        return op.Slice(x, ends=[2])

    with pytest.raises(DslError, match="missing its input 'starts'"):
        skipped.to_model_proto()
    with pytest.raises(DslError, match="missing its input 'starts'"):
        op.Slice(np.arange(4, dtype=F32), ends=[2])


def test_a_keyword_that_is_neither_input_nor_attribute_stays_an_error() -> None:
    @script()
    def typo(x: FLOAT[2]) -> FLOAT[None, 2]:
        return op.Unsqueeze(x, axis=[0])

    with pytest.raises(DslError, match="Unsqueeze has no attribute 'axis'") as caught:
        typo.to_model_proto()
    assert "did you mean axes" in caught.value.hint
    with pytest.raises(DslError, match="Unsqueeze has no attribute 'axis'"):
        op.Unsqueeze(np.zeros(2, F32), axis=[0])


# ------------------------------------------------------------- 3. element types as values


def test_dtype_is_the_onnx_enum_and_numpy_dtype_the_array_type() -> None:
    assert FLOAT.dtype == TensorProto.FLOAT and INT64.dtype == TensorProto.INT64
    assert FLOAT16.numpy_dtype == np.float16 and DOUBLE.numpy_dtype == np.float64
    assert FLOAT.to_type_proto() == oh.make_tensor_type_proto(TensorProto.FLOAT, [])


@pytest.mark.parametrize("target", ["dtype", "type"])
def test_cast_to_a_type_object(target: str) -> None:
    to = INT64.dtype if target == "dtype" else INT64

    @script()
    def truncate(x: FLOAT[3]) -> INT64[3]:
        return op.Cast(x, to=to)

    x = np.array([1.7, -2.2, 3.0], F32)
    check_script(truncate, [x], x.astype(np.int64))


# ------------------------------------------------------------- 4. typing annotations

TFloat = TypeVar("TFloat", bound=Union[FLOAT, DOUBLE])
TReal = TypeVar("TReal", FLOAT, DOUBLE, INT64)
TTensor = TypeVar("TTensor")


def test_typevar_bound_to_a_union_accepts_each_member() -> None:
    @script()
    def scale(x: TFloat, factor: TFloat) -> TFloat:
        return op.Mul(x, factor)

    function = scale.to_function_proto()
    onnx.checker.check_function(function)
    assert [i for i in function.input] == ["x", "factor"]
    for dtype in (np.float32, np.float64):
        x = np.array([1.0, 2.0], dtype)
        got = scale(x, np.array(3.0, dtype))
        assert got.dtype == dtype and got.tolist() == [3.0, 6.0]
    # As a model the input needs one type: io_types picks it.
    check_script(scale, [np.array([1.5], F32), np.array([2.0], F32)], np.array([3.0], F32),
                 io_types=[FLOAT[1], FLOAT[1]])


def test_torch_lib_style_functions() -> None:
    # The shape of onnxscript's aten library: TypeVar-typed inputs named like torch's,
    # an attribute cast to the input's type, optional inputs, a sequence of any tensor.

    @script()
    def aten_add(self: TReal, other: TReal, alpha: float = 1.0) -> TReal:
        alpha = op.CastLike(alpha, other)
        other = op.Mul(other, alpha)
        return op.Add(self, other)

    @script()
    def aten_clamp(self: TFloat, min: Optional[TFloat] = None, max: Optional[TFloat] = None) -> TFloat:  # noqa: UP045
        return op.Clip(self, min, max)

    @script()
    def aten_cat(tensors: typing.Sequence[TTensor], dim: int = 0) -> TTensor:
        return op.ConcatFromSequence(tensors, axis=dim)

    for function in (aten_add, aten_clamp, aten_cat):
        onnx.checker.check_function(function.to_function_proto())
    a = np.array([1, 2], np.int64)
    assert aten_add(a, a, alpha=3.0).tolist() == [4, 8]
    x = np.array([-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(aten_clamp(x, np.array(0.0), np.array(1.0)), np.clip(x, 0.0, 1.0))
    np.testing.assert_array_equal(aten_clamp(x, None, np.array(1.0)), np.minimum(x, 1.0))
    joined = aten_cat([np.ones((1, 2), F32), np.zeros((2, 2), F32)])
    np.testing.assert_array_equal(joined, np.concatenate([np.ones((1, 2)), np.zeros((2, 2))]).astype(F32))


def test_typevar_with_constraints_and_union_operator() -> None:
    @script()
    def absolute(x: TReal, y: FLOAT | DOUBLE) -> TReal:
        return op.Abs(x)

    got = absolute(np.array([-3, 4], np.int64), np.zeros(1, F32))
    assert got.dtype == np.int64 and got.tolist() == [3, 4]
    onnx.checker.check_function(absolute.to_function_proto())


def test_optional_input_may_be_left_out() -> None:
    @script()
    def clip_low(x: FLOAT[3], low: Optional[FLOAT] = None) -> FLOAT[3]:  # noqa: UP045 (onnxscript's spelling)
        return op.Clip(x, low)

    x = np.array([-1.0, 0.5, 2.0], F32)
    check_script(clip_low, [x, np.array(0.0, F32)], np.clip(x, 0.0, None))
    model = clip_low.to_model_proto()
    assert model.graph.input[1].type.tensor_type.elem_type == TensorProto.FLOAT
    np.testing.assert_array_equal(clip_low(x), x)  # None: Clip without a bound

    @script()
    def clip_high(x: FLOAT[3], high: FLOAT | None = None) -> FLOAT[3]:
        return op.Clip(x, None, high)

    check_script(clip_high, [x, np.array(1.0, F32)], np.clip(x, None, 1.0))


def test_optional_attribute_annotation() -> None:
    @script()
    def softmax(x: FLOAT[2, 3], axis: Optional[int] = -1) -> FLOAT[2, 3]:  # noqa: UP045 (onnxscript's spelling)
        return op.Softmax(x, axis=axis)

    assert [a.name for a in softmax.to_function_proto().attribute_proto] == ["axis"]
    x = np.arange(6, dtype=F32).reshape(2, 3)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    check_script(softmax, [x], e / e.sum(axis=1, keepdims=True))


def test_typing_sequence_of_tensors() -> None:
    @script()
    def joined(parts: typing.Sequence[FLOAT[None]]) -> FLOAT[None]:
        return op.ConcatFromSequence(parts, axis=0)

    parts = [np.array([1.0, 2.0], F32), np.array([3.0], F32)]
    assert joined(parts).tolist() == [1.0, 2.0, 3.0]
    model = joined.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.input[0].type.HasField("sequence_type")
    got = onnx.reference.ReferenceEvaluator(model).run(None, {"parts": parts})[0]
    assert got.tolist() == [1.0, 2.0, 3.0]


def test_the_tensor_type_class_means_any_tensor() -> None:
    @script()
    def identity(x: TensorType) -> TensorType:
        return op.Identity(x)

    assert identity(np.array(["a"], object)).tolist() == ["a"]
    onnx.checker.check_function(identity.to_function_proto())


def test_an_annotation_that_is_no_type_stays_an_error() -> None:
    @script()
    def wrong(x: Union[FLOAT, complex]) -> FLOAT:
        return x

    with pytest.raises(DslTypeError, match="which @script does not understand"):
        wrong.to_function_proto()


# ------------------------------------------------------------- 5. script() options


def test_script_keeps_model_options() -> None:
    @script(opset13, ir_version=7, producer_name="tests", producer_version="2.1")
    def relu(x: FLOAT[3]) -> FLOAT[3]:
        return opset13.Relu(x)

    model = relu.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert (model.ir_version, model.producer_name, model.producer_version) == (7, "tests", "2.1")
    assert relu.to_model_proto(producer_name="override").producer_name == "override"
    x = np.array([-1.0, 2.0, -3.0], F32)
    np.testing.assert_array_equal(run_model(model, [x])[0], np.maximum(x, 0))


def test_an_explicit_ir_version_older_than_the_opset_table_is_honoured() -> None:
    # onnxscript's documentation example: IR 7 on an opset-15 function, which onnx's table
    # pairs with IR 8; onnxscript writes it and onnxruntime loads it.
    from dsl import opset15

    @script(opset15, ir_version=7, producer_name="OnnxScript", producer_version="0.1")
    def relu(x: FLOAT[3]) -> FLOAT[3]:
        return opset15.Relu(x)

    table = onnx.helper.find_min_ir_version_for([oh.make_opsetid("", 15)])
    assert table > 7  # (the case exists only while onnx's table says so)
    with pytest.warns(UserWarning, match=f"ir_version=7 is older .* \\(IR version {table}\\)"):
        model = relu.to_model_proto()
    assert (model.ir_version, model.producer_name, model.producer_version) == (7, "OnnxScript", "0.1")
    onnx.checker.check_model(model, full_check=True)
    x = np.array([-1.0, 2.0, -3.0], F32)
    np.testing.assert_array_equal(run_model(model, [x])[0], np.maximum(x, 0))


def test_an_ir_version_lacking_what_the_model_uses_is_an_error() -> None:
    @script(opset18, inline=False)
    def twice(x: FLOAT[3]) -> FLOAT[3]:
        return opset18.Add(x, x)

    @script(opset18, ir_version=7)
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return twice(x)

    with pytest.raises(DslError, match="too old"):  # model-local functions came with IR 8
        caller.to_model_proto()


def test_unknown_script_option_is_an_error() -> None:
    with pytest.raises(DslTypeError, match="unexpected keyword argument"):
        script(opset18, producer="x")


def test_a_custom_opset_names_the_function_domain_and_version() -> None:
    custom = Opset("pkg.custom", 2)

    @script(custom)
    def double(x: FLOAT[3]) -> FLOAT[3]:
        return op.Add(x, x)

    @script()
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return double(x)

    assert double.to_function_proto().domain == "pkg.custom"
    model = caller.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert (model.graph.node[0].domain, model.functions[0].domain) == ("pkg.custom", "pkg.custom")
    assert {(o.domain, o.version) for o in model.opset_import} >= {("pkg.custom", 2)}
    x = np.array([1.0, -2.0, 3.0], F32)
    check_script(caller, [x], 2 * x)


def test_export_onnx_lib_saves_functions_as_a_library(tmp_path: Path) -> None:
    @script(Opset("pkg.lib", 1))
    def gelu(x: FLOAT[...]) -> FLOAT[...]:
        return 0.5 * x * (1.0 + op.Erf(x / 1.4142135))

    @script(default_opset=opset18)
    def square(x: FLOAT[...]) -> FLOAT[...]:
        return x * x

    @script(opset13)
    def older(x: FLOAT[...]) -> FLOAT[...]:
        return opset13.ReduceMean(x, axes=[0])   # ReduceMean changed at 18: no model imports both

    path = tmp_path / "lib.onnx"
    with pytest.raises(ConversionError, match="cannot share one library"):
        export_onnx_lib([gelu, older], path)
    assert not path.exists()
    export_onnx_lib([gelu, square], path)
    onnx.checker.check_model(str(path), full_check=True)
    saved = onnx.load(str(path))
    assert [(f.domain, f.name) for f in saved.functions] == [("pkg.lib", "gelu"), ("this", "square")]
    assert len(saved.graph.node) == 0
    # The library's functions are usable: call one from a model built around it.
    node = oh.make_node("square", ["x"], ["y"], domain="this")
    graph_proto = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    user = oh.make_model(graph_proto, functions=list(saved.functions), opset_imports=list(saved.opset_import),
                         ir_version=saved.ir_version)
    onnx.checker.check_model(user, full_check=True)
    assert run_model(user, [np.array([3.0, -2.0], F32)])[0].tolist() == [9.0, 4.0]


# ------------------------------------------------------------- 6. eager agrees with export


def test_subfunction_takes_a_scalar_for_a_one_element_parameter() -> None:
    @script()
    def add(x: FLOAT[1], y: FLOAT[1]) -> FLOAT[1]:
        return x + y

    @script()
    def caller(x: FLOAT[1]) -> FLOAT[1]:
        return add(x, op.Constant(value_float=1.5))

    check_script(caller, [np.array([2.0], F32)], np.array([3.5], F32))


def test_outermost_eager_call_still_checks_the_declared_rank() -> None:
    @script()
    def add(x: FLOAT[1], y: FLOAT[1]) -> FLOAT[1]:
        return x + y

    with pytest.raises(DslTypeError, match="rank 1"):
        add(np.array([1.0], F32), np.array(2.0, F32))


def test_scan_over_a_graph_body_gives_the_exported_shape() -> None:
    @script()
    def cumulative_sum(x: FLOAT[4]) -> FLOAT[4]:
        @graph()
        def step(total: FLOAT, item: FLOAT) -> tuple[FLOAT, FLOAT]:
            total = total + item
            return total, total

        init = op.Constant(value_float=0.0)
        _, sums = op.Scan(init, x, body=step, num_scan_inputs=1)
        return sums

    x = np.array([1.0, 2.0, 3.0, 4.0], F32)
    check_script(cumulative_sum, [x], np.cumsum(x))


# ------------------------------------------------------------- 8. stricter on purpose


def test_a_loop_body_needs_graph() -> None:
    # onnxscript takes any nested def as a body; dsl asks for @graph(), which says the
    # function is a subgraph that may read the enclosing values, not a Python helper.
    @script()
    def count(x: FLOAT[2], n: INT64) -> FLOAT[2]:
        def body(i: INT64, go: BOOL, y: FLOAT[2]) -> tuple[BOOL, FLOAT[2]]:
            return go, y + 1.0

        return op.Loop(n, None, x, body=body)

    with pytest.raises(UnsupportedSyntaxError, match="unless decorated with @graph") as caught:
        count.to_model_proto()
    assert "@graph()" in caught.value.hint


def test_string_equality_needs_opset_19() -> None:
    # Equal takes strings from opset 19 on; below it the model would not load.
    @script(opset18)
    def same(x: STRING[2], word: str = "a") -> BOOL[2]:
        return x == word

    with pytest.raises(DslTypeError, match=r"STRING, which opset ai\.onnx 18 does not allow"):
        same.to_model_proto()

    @script(opset18)
    def by_mode(x: FLOAT[2], mode: str = "neg") -> FLOAT[2]:
        if mode == "neg":
            y = -x
        else:
            y = x
        return y

    with pytest.raises(DslTypeError, match=r"STRING, which opset ai\.onnx 18 does not allow") as caught:
        by_mode.to_model_proto()
    assert caught.value.location is not None and "mode ==" in caught.value.location.source_line


def test_dropout_training_mode_is_an_input_never_an_attribute() -> None:
    @script()
    def dropped(x: FLOAT[4]) -> FLOAT[4]:
        return op.Dropout(x, training_mode=False)

    node = dropped.to_model_proto().graph.node[-1]
    assert node.op_type == "Dropout" and not node.attribute and len(node.input) == 3 and node.input[1] == ""
    x = np.arange(4, dtype=F32)
    check_script(dropped, [x], x)


@pytest.mark.parametrize("version", [11, 13])
def test_reduce_sum_axes_follow_the_schema_of_the_opset(version: int) -> None:
    # ReduceSum's axes is an attribute up to opset 12 and an input from 13 on: the same
    # keyword becomes whichever the schema has, never an attribute the op lacks.
    ops = Opset("", version)

    @script(ops)
    def total(x: FLOAT[2, 3]) -> FLOAT[2, 1]:
        return ops.ReduceSum(x, axes=[1])

    node = total.to_model_proto().graph.node[-1]
    assert [a.name for a in node.attribute] == (["axes"] if version < 13 else [])
    x = np.arange(6, dtype=F32).reshape(2, 3)
    check_script(total, [x], x.sum(axis=1, keepdims=True))


def test_exported_models_of_this_module_pass_the_checker() -> None:
    @script()
    def combined(x: FLOAT[2, 3]) -> FLOAT[2, 3]:
        c = op.Constant(value=oh.make_tensor("c", TensorProto.FLOAT, [1], [2.0]))
        return op.Cast(op.Unsqueeze(x, axes=[0]) * c, to=FLOAT.dtype)[0]

    x = np.ones((2, 3), F32)
    np.testing.assert_array_equal(export_and_run(combined, [x])[0], 2 * x)
