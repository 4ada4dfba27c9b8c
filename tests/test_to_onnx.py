"""converter.to_onnx: IR built by hand -> protos that the checker accepts and onnxruntime runs.

The IR here is written directly (not through ``@script``) so this back end is tested
independently of the front end; results are compared with numpy.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.reference
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.to_onnx import function_to_proto, graph_to_proto, model_to_proto, tensor_to_proto, type_to_proto
from dsl import FLOAT, INT64, ConversionError, DslError, ir
from dsl.onnxruntime_limits import max_ir_version, max_opset
from dsl.types import ELEMENT_TYPES, numpy_dtype
from tests.work_count import assert_linear

K = ir.AttrKind


def run(model: onnx.ModelProto, *inputs: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


def const(name: str, array: np.ndarray) -> ir.Value:
    return ir.Value(name, None, initializer=ir.Tensor(np.asarray(array), _elem(np.asarray(array))))


def _elem(array: np.ndarray) -> int:
    from dsl.types import element_type_of_dtype

    return element_type_of_dtype(array.dtype)


def node(op_type: str, inputs: list[ir.Value | None], outputs: list[ir.Value], **attributes: ir.Attr) -> ir.Node:
    made = ir.Node(op_type, inputs=inputs, outputs=outputs, attributes=dict(attributes))
    for output in outputs:
        output.producer = made
    return made


def leaky_function(default: float | None = 0.1) -> ir.Function:
    """f(x) = LeakyRelu(x + w, alpha=@alpha) with an initializer w and an attribute parameter."""
    x = ir.Value("x", FLOAT["N", 4])
    w = const("w", np.arange(4, dtype=np.float32))
    summed = ir.Value("summed")
    y = ir.Value("y", FLOAT["N", 4])
    nodes = [
        node("Add", [x, w], [summed]),
        node("LeakyRelu", [summed], [y], alpha=ir.Attr("alpha", K.FLOAT, None, ref_attr_name="alpha")),
    ]
    param_default = None if default is None else ir.Attr("alpha", K.FLOAT, default)
    return ir.Function(
        "leaky",
        ir.Graph("leaky", [x], [y], nodes, initializers=[w]),
        domain="this",
        attr_params=[ir.AttrParam("alpha", K.FLOAT, param_default)],
        opset_imports={"": 18},
    )


def leaky_oracle(x: np.ndarray, alpha: float) -> np.ndarray:
    summed = x + np.arange(4, dtype=np.float32)
    return np.where(summed >= 0, summed, alpha * summed).astype(np.float32)


# ---------------------------------------------------------------------------- models


def test_model_with_initializer_and_attribute_default_runs() -> None:
    model = model_to_proto(leaky_function())
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
    assert [i.name for i in model.graph.initializer] == ["w"]
    x = np.linspace(-5, 5, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(run(model, x)[0], leaky_oracle(x, 0.1), rtol=1e-6)


def test_attributes_option_overrides_default() -> None:
    from dsl.script_function import model_to_proto  # Python values and inline=: the facade's options

    model = model_to_proto(leaky_function(), attributes={"alpha": 0.5})
    onnx.checker.check_model(model, full_check=True)
    x = np.linspace(-5, 5, 8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(run(model, x)[0], leaky_oracle(x, 0.5), rtol=1e-6)


def test_attribute_without_default_is_a_dsl_error_with_hint() -> None:
    from dsl.script_function import model_to_proto  # Python values and inline=: the facade's options

    with pytest.raises(ConversionError) as caught:
        model_to_proto(leaky_function(default=None))
    assert "alpha" in str(caught.value)
    assert "to_function_proto" in caught.value.hint
    with pytest.raises(ConversionError, match="no attribute parameter beta"):
        model_to_proto(leaky_function(), attributes={"beta": 1.0})


def test_function_proto_keeps_attribute_reference_and_default() -> None:
    proto = function_to_proto(leaky_function())
    onnx.checker.check_function(proto)
    assert (proto.domain, proto.name) == ("this", "leaky")
    assert list(proto.input) == ["x"] and list(proto.output) == ["y"]
    assert [n.op_type for n in proto.node] == ["Constant", "Add", "LeakyRelu"]
    assert proto.node[2].attribute[0].ref_attr_name == "alpha"
    assert proto.attribute_proto[0].name == "alpha" and proto.attribute_proto[0].f == pytest.approx(0.1)
    required = function_to_proto(leaky_function(default=None))
    assert list(required.attribute) == ["alpha"] and not required.attribute_proto


def test_model_local_function_called_from_main_graph() -> None:
    callee = leaky_function()
    a = ir.Value("a", FLOAT[3, 4])
    b = ir.Value("b", FLOAT[3, 4])
    call = node("leaky", [a], [b], alpha=ir.Attr("alpha", K.FLOAT, 0.25))
    call.domain = "this"
    call.callee = callee
    main = ir.Function("main", ir.Graph("main", [a], [b], [call]), opset_imports={"": 18})
    model = model_to_proto(main)
    onnx.checker.check_model(model, full_check=True)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 18), ("this", 1)}
    assert [(f.domain, f.name) for f in model.functions] == [("this", "leaky")]
    assert model.ir_version == 9  # the function's attribute default needs IR 9
    x = np.linspace(-5, 5, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(run(model, x)[0], leaky_oracle(x, 0.25), rtol=1e-6)


def test_distinct_functions_with_one_name_are_renamed() -> None:
    first = leaky_function()
    second = leaky_function()
    a = ir.Value("a", FLOAT[2, 4])
    mid = ir.Value("mid")
    b = ir.Value("b", FLOAT[2, 4])
    calls = [node("leaky", [a], [mid]), node("leaky", [mid], [b])]
    for call, callee in zip(calls, (first, second)):
        call.domain, call.callee = "this", callee
    model = model_to_proto(ir.Function("main", ir.Graph("main", [a], [b], calls), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    assert sorted(f.name for f in model.functions) == ["leaky", "leaky_1"]
    assert [n.op_type for n in model.graph.node] == ["leaky", "leaky_1"]


def test_callee_only_opsets_and_nested_callees_are_imported() -> None:
    inner = leaky_function()
    x = ir.Value("x")
    y = ir.Value("y")
    call_inner = node("leaky", [x], [y])
    call_inner.domain, call_inner.callee = "this", inner
    outer = ir.Function("outer", ir.Graph("outer", [x], [y], [call_inner]), domain="lib", opset_imports={"": 17})
    a = ir.Value("a", FLOAT[2, 4])
    b = ir.Value("b", FLOAT[2, 4])
    call_outer = node("outer", [a], [b])
    call_outer.domain, call_outer.callee = "lib", outer
    model = model_to_proto(ir.Function("main", ir.Graph("main", [a], [b], [call_outer])))
    onnx.checker.check_model(model, full_check=True)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 18), ("this", 1), ("lib", 1)}
    assert [f.name for f in model.functions] == ["leaky", "outer"]  # callees first
    outer_proto = model.functions[1]
    assert {(o.domain, o.version) for o in outer_proto.opset_import} == {("", 17), ("this", 1)}
    x_in = np.linspace(-5, 5, 8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(run(model, x_in)[0], leaky_oracle(x_in, 0.1), rtol=1e-6)


def test_subgraph_reads_outer_values_and_names_stay_unique() -> None:
    # If(cond) then: x * 2 (reads outer x) else: x - 1; both branches name their result "r".
    x = ir.Value("x", FLOAT[3])
    cond = ir.Value("cond", ir.TensorType(9, ()))
    two = ir.Value("r")
    then_out = ir.Value("r")
    else_out = ir.Value("r")
    then_graph = ir.Graph(
        "then", [], [then_out], [node("Constant", [], [two], value=ir.Attr("value", K.TENSOR, ir.Tensor(np.array(2, np.float32), 1))), node("Mul", [x, two], [then_out])]
    )
    one = const("one", np.array(1, np.float32))
    else_graph = ir.Graph("else", [], [else_out], [node("Sub", [x, one], [else_out])])
    y = ir.Value("r", FLOAT[3])
    if_node = node(
        "If", [cond], [y],
        then_branch=ir.Attr("then_branch", K.GRAPH, then_graph),
        else_branch=ir.Attr("else_branch", K.GRAPH, else_graph),
    )
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x, cond], [y], [if_node]), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    names = [model.graph.output[0].name]
    for attr in model.graph.node[0].attribute:
        names += [o for n in attr.g.node for o in n.output]
    assert len(names) == len(set(names)), names
    # A constant first read inside a subgraph is written as that subgraph's initializer.
    else_proto = next(a.g for a in model.graph.node[0].attribute if a.name == "else_branch")
    assert [i.name for i in else_proto.initializer] == ["one"]
    data = np.array([1, 2, 3], np.float32)
    np.testing.assert_allclose(run(model, data, np.array(True))[0], data * 2)
    np.testing.assert_allclose(run(model, data, np.array(False))[0], data - 1)


def test_duplicate_names_and_twice_returned_value() -> None:
    x = ir.Value("x", FLOAT[2])
    first = ir.Value("x")  # clashes with the input
    second = ir.Value("")  # unnamed but used: gets a generated name
    nodes = [node("Neg", [x], [first]), node("Abs", [first], [second])]
    second.name = ""
    out = ir.Value("out")
    nodes.append(node("Identity", [second], [out]))
    graph = ir.Graph("g", [x], [out, out], nodes)
    model = model_to_proto(ir.Function("g", graph, opset_imports={"": 18}), io_types=[FLOAT[2], FLOAT[2], FLOAT[2]])
    onnx.checker.check_model(model, full_check=True)
    outputs = [o.name for o in model.graph.output]
    assert len(set(outputs)) == 2
    assert model.graph.node[-1].op_type == "Identity"
    again = model_to_proto(ir.Function("g", graph, opset_imports={"": 18}), io_types=[FLOAT[2], FLOAT[2], FLOAT[2]])
    assert again.SerializeToString() == model.SerializeToString()  # deterministic
    data = np.array([-1, 2], np.float32)
    got = run(model, data)
    np.testing.assert_array_equal(got[0], np.abs(data))
    np.testing.assert_array_equal(got[1], np.abs(data))


def test_omitted_optional_inputs_and_outputs() -> None:
    x = ir.Value("x", FLOAT[5])
    high = const("high", np.array(1.0, np.float32))
    clipped = ir.Value("clipped", FLOAT[5])
    clip = node("Clip", [x, None, high], [clipped])
    trailing = ir.Value("trailing", FLOAT[5])
    clip_min_only = node("Clip", [x, None, None], [trailing])
    dropped = ir.Value("dropped", FLOAT[5])
    mask = ir.Value("")  # omitted optional output
    dropout = node("Dropout", [clipped], [dropped, mask])
    model = model_to_proto(
        ir.Function("f", ir.Graph("f", [x], [dropped, trailing], [clip, clip_min_only, dropout]), opset_imports={"": 18})
    )
    onnx.checker.check_model(model, full_check=True)
    assert list(model.graph.node[0].input) == ["x", "", "high"]
    assert list(model.graph.node[1].input) == ["x"]
    assert list(model.graph.node[2].output) == ["dropped", ""]
    data = np.array([-2, -0.5, 0, 0.5, 2], np.float32)
    got = run(model, data)
    np.testing.assert_array_equal(got[0], np.minimum(data, 1))
    np.testing.assert_array_equal(got[1], data)


def test_unnamed_output_that_is_read_gets_a_name() -> None:
    x = ir.Value("x", FLOAT[5])
    dropped = ir.Value("dropped", FLOAT[5])
    mask = ir.Value("")
    y = ir.Value("y", ir.TensorType(9, (5,)))
    nodes = [node("Dropout", [x], [dropped, mask]), node("Identity", [mask], [y])]
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], [y], nodes), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.node[0].output[1] == model.graph.node[1].input[0] != ""
    assert run(model, np.ones(5, np.float32))[0].tolist() == [True] * 5


# --------------------------------------------------------------------- types, io_types


def test_missing_output_type_is_inferred_only_where_missing() -> None:
    x = ir.Value("x", FLOAT["N", 3])
    shape = ir.Value("shape")
    y = ir.Value("y")  # no type: inferred
    z = ir.Value("z", FLOAT[...])  # no rank: inferred
    nodes = [node("Shape", [x], [shape]), node("Cast", [shape], [y], to=ir.Attr("to", K.INT, 1)), node("Relu", [x], [z])]
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], [shape, y, z], nodes), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    assert all(o.type.tensor_type.HasField("shape") for o in model.graph.output)
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [2]
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert model.graph.output[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in model.graph.output[2].type.tensor_type.shape.dim] == ["N", 3]


@pytest.mark.parametrize("reshaped", [False, True], ids=["plain inference suffices", "needs data propagation"])
def test_inferred_output_types_are_those_data_propagation_gives(reshaped: bool) -> None:
    """Inference runs without data propagation first (half the time) and again with it
    only where an output is left open: either way the outputs are typed as the full
    inference types them (the oracle: onnx.shape_inference with data_prop on the model)."""
    x = ir.Value("x", FLOAT["N", 6])
    relu, shape, flat, y = ir.Value("relu"), ir.Value("shape"), ir.Value("flat"), ir.Value("y")
    if reshaped:  # Reshape to a shape computed from Shape: only data propagation knows it
        nodes = [node("Relu", [x], [relu]), node("Shape", [x], [shape]), node("Reshape", [relu, shape], [y])]
    else:
        nodes = [node("Relu", [x], [relu]), node("Neg", [relu], [y])]
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], [y], nodes), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    untyped = onnx.ModelProto()
    untyped.CopyFrom(model)
    untyped.graph.output[0].ClearField("type")
    full = onnx.shape_inference.infer_shapes(untyped, data_prop=True)
    expected = next(vi for vi in [*full.graph.output, *full.graph.value_info] if vi.name == "y").type
    assert model.graph.output[0].type == expected
    assert [d.dim_param or d.dim_value for d in expected.tensor_type.shape.dim] == ["N", 6]


def test_unknowable_output_type_and_untyped_input_are_errors() -> None:
    x = ir.Value("x", FLOAT[2])
    y = ir.Value("y")
    custom = node("Mystery", [x], [y])
    custom.domain = "com.example"
    function = ir.Function("f", ir.Graph("f", [x], [y], [custom]), opset_imports={"": 18, "com.example": 1})
    with pytest.raises(ConversionError, match="type of output 'y' is unknown") as caught:
        model_to_proto(function)
    assert "io_types" in caught.value.hint
    model = model_to_proto(function, io_types={"y": FLOAT[2]})
    onnx.checker.check_model(model, full_check=True)
    untyped = ir.Value("u")
    out = ir.Value("o", FLOAT[2])
    with pytest.raises(ConversionError, match="input 'u' has no type"):
        model_to_proto(ir.Function("g", ir.Graph("g", [untyped], [out], [node("Relu", [untyped], [out])])))


def test_io_types_dict_list_and_mistakes() -> None:
    x = ir.Value("x", FLOAT[...])
    y = ir.Value("y", FLOAT[...])
    function = ir.Function("f", ir.Graph("f", [x], [y], [node("Relu", [x], [y])]), opset_imports={"": 18})
    by_name = model_to_proto(function, io_types={"x": FLOAT["B", 7]})
    by_list = model_to_proto(function, io_types=[FLOAT["B", 7]])
    for model in (by_name, by_list):
        onnx.checker.check_model(model, full_check=True)
        assert [d.dim_param or d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == ["B", 7]
    scalar = model_to_proto(function, io_types=[INT64, INT64])
    assert scalar.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    with pytest.raises(ConversionError, match="neither an input nor an output"):
        model_to_proto(function, io_types={"nope": FLOAT[2]})
    with pytest.raises(ConversionError, match="lists 3 types"):
        model_to_proto(function, io_types=[FLOAT[2]] * 3)
    with pytest.raises(ConversionError, match="not a type"):
        model_to_proto(function, io_types={"x": "float"})


def test_sequence_and_optional_types() -> None:
    x = ir.Value("x", FLOAT["N"])
    seq = ir.Value("seq", ir.SequenceType(FLOAT["N"]))
    maybe = ir.Value("maybe", ir.OptionalType(FLOAT["N"]))
    nodes = [node("SequenceConstruct", [x, x], [seq]), node("Optional", [x], [maybe])]
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], [seq, maybe], nodes), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.output[0].type.HasField("sequence_type")
    assert model.graph.output[1].type.HasField("optional_type")
    data = np.array([1, 2], np.float32)
    got = run(model, data)
    assert len(got[0]) == 2
    np.testing.assert_array_equal(got[0][1], data)
    np.testing.assert_array_equal(got[1], data)


def test_type_to_proto_shapes() -> None:
    proto = type_to_proto(FLOAT[2, "N", None])
    dims = proto.tensor_type.shape.dim
    assert [dims[0].dim_value, dims[1].dim_param, dims[2].HasField("dim_value"), dims[2].HasField("dim_param")] == [
        2, "N", False, False,
    ]
    assert type_to_proto(FLOAT).tensor_type.HasField("shape")  # rank 0: a present, empty shape
    assert not type_to_proto(FLOAT[...]).tensor_type.HasField("shape")


# ------------------------------------------------------------------ tensors and attributes


def _sample(elem: int) -> np.ndarray:
    dtype = numpy_dtype(elem)
    if dtype.kind == "O":
        return np.array(["a", "bé", ""], dtype=object)
    if dtype.kind == "b":
        return np.array([True, False, True])
    if dtype.kind == "c":
        return np.array([1 + 2j, -1j], dtype=dtype)
    values = np.array([0, 1, 2, 3, 0, 1], dtype=np.float32)
    if "int2" in dtype.name or "uint2" in dtype.name:
        values = np.array([0, 1, 1, 0], dtype=np.float32)
    return values.astype(dtype).reshape(2, -1)


@pytest.mark.parametrize("name", sorted(ELEMENT_TYPES))
def test_tensor_to_proto_round_trips_every_element_type(name: str) -> None:
    elem = ELEMENT_TYPES[name].enum
    array = _sample(elem)
    proto = tensor_to_proto(ir.Tensor(array, elem, "t"))
    assert proto.data_type == elem and proto.name == "t"
    back = onnx.numpy_helper.to_array(proto)
    if array.dtype.kind == "O":
        assert [v.decode() if isinstance(v, bytes) else v for v in back.tolist()] == array.tolist()
    else:
        assert back.dtype == array.dtype
        np.testing.assert_array_equal(back.astype(np.float64) if back.dtype.kind not in "bc" else back,
                                      array.astype(np.float64) if array.dtype.kind not in "bc" else array)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=20))
def test_float32_initializer_is_exact(values: list[float]) -> None:
    array = np.array(values, np.float32)
    back = onnx.numpy_helper.to_array(tensor_to_proto(ir.Tensor(array, 1)))
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize(
    ("dtype", "ir_version"),
    [("float32", 8), ("bfloat16", 8), ("float8_e4m3fn", 9), ("int4", 10), ("float4_e2m1fn", 11),
     ("float8_e8m0fnu", 12), ("int2", 13)],
)
def test_element_types_raise_ir_version(dtype: str, ir_version: int) -> None:
    numpy_type = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    from dsl.types import element_type_of_dtype

    elem = element_type_of_dtype(numpy_type)
    # The weight is returned as is, so no op (and no opset) constrains its element type.
    weight = ir.Value("w", ir.TensorType(elem, (3,)), initializer=ir.Tensor(np.zeros(3, numpy_type), elem))
    x = ir.Value("x", FLOAT[3])
    y = ir.Value("y", FLOAT[3])
    graph = ir.Graph("f", [x], [y, weight], [node("Relu", [x], [y])], initializers=[weight])
    model = model_to_proto(ir.Function("f", graph, opset_imports={"": 18}))
    assert model.ir_version == ir_version
    onnx.checker.check_model(model, full_check=True)


def test_attribute_kinds() -> None:
    x = ir.Value("x", FLOAT[2, 3])
    outs = [ir.Value(n) for n in ("c", "t", "s", "ints")]
    nodes = [
        node("Constant", [], [outs[0]], value_floats=ir.Attr("value_floats", K.FLOATS, [1.0, 2.5])),
        node("Transpose", [x], [outs[1]], perm=ir.Attr("perm", K.INTS, [1, 0])),
        node("Constant", [], [outs[2]], value_strings=ir.Attr("value_strings", K.STRINGS, ["a", b"b"])),
        node("Constant", [], [outs[3]], value=ir.Attr("value", K.TENSOR, ir.Tensor(np.array([7, 8]), 7))),
    ]
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], outs, nodes), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = onnx.reference.ReferenceEvaluator(model).run(None, {"x": data})
    np.testing.assert_array_equal(got[0], [1.0, 2.5])
    np.testing.assert_array_equal(got[1], data.T)
    assert [v.decode() if isinstance(v, bytes) else v for v in got[2].tolist()] == ["a", "b"]
    np.testing.assert_array_equal(got[3], [7, 8])


def test_graph_to_proto_keeps_references() -> None:
    x = ir.Value("x", FLOAT[2])
    y = ir.Value("y", FLOAT[2])
    graph = ir.Graph("body", [x], [y], [node("LeakyRelu", [x], [y], alpha=ir.Attr("alpha", K.FLOAT, None, ref_attr_name="a"))])
    proto = graph_to_proto(graph)
    assert proto.name == "body" and proto.node[0].attribute[0].ref_attr_name == "a"
    assert proto.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


# ------------------------------------------------------------------------- IR versions


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=7, max_value=max_opset()))
def test_ir_version_is_minimal_and_loadable(opset: int) -> None:
    x = ir.Value("x", FLOAT[2])
    y = ir.Value("y", FLOAT[2])
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], [y], [node("Relu", [x], [y])]), opset_imports={"": opset}))
    assert model.ir_version == onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])
    assert model.ir_version <= max_ir_version()
    onnx.checker.check_model(model, full_check=True)
    np.testing.assert_array_equal(run(model, np.array([-1, 1], np.float32))[0], [0, 1])


def test_opset_newer_than_onnxruntime_still_exports() -> None:
    newest = onnx.defs.onnx_opset_version()
    x = ir.Value("x", FLOAT[2])
    y = ir.Value("y", FLOAT[2])
    function = ir.Function("f", ir.Graph("f", [x], [y], [node("Relu", [x], [y])]), opset_imports={"": newest})
    model = model_to_proto(function)
    assert model.ir_version == onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", newest)])
    onnx.checker.check_model(model, full_check=True)


def test_explicit_ir_version() -> None:
    function = leaky_function()
    assert model_to_proto(function, ir_version=10).ir_version == 10
    # older than onnx's table pairs with opset 18, and loaded by onnxruntime: honoured, with a warning
    with pytest.warns(UserWarning, match=r"ir_version=6 is older .*\(IR version 8\)"):
        assert model_to_proto(function, ir_version=6).ir_version == 6
    with pytest.raises(ConversionError, match="too old"):  # (before opset_import existed)
        model_to_proto(function, ir_version=2)


def test_ir_model_with_metadata() -> None:
    x = ir.Value("x", FLOAT[2])
    y = ir.Value("y", FLOAT[2])
    model_ir = ir.Model(
        ir.Graph("g", [x], [y], [node("Relu", [x], [y])]),
        opset_imports={"": 17},
        producer_name="someone",
        producer_version="9",
        domain="org.example",
        model_version=3,
        doc_string="a relu",
        metadata_props={"k": "v"},
    )
    model = model_to_proto(model_ir)
    onnx.checker.check_model(model, full_check=True)
    assert (model.producer_name, model.producer_version, model.domain, model.model_version) == (
        "someone", "9", "org.example", 3,
    )
    assert model.doc_string == "a relu"
    assert {p.key: p.value for p in model.metadata_props} == {"k": "v"}
    assert model.ir_version == 8
    renamed = model_to_proto(model_ir, producer_name="me", metadata_props={"extra": "1"})
    assert renamed.producer_name == "me"
    assert {p.key: p.value for p in renamed.metadata_props} == {"k": "v", "extra": "1"}


def test_not_ir_is_a_dsl_error() -> None:
    with pytest.raises(DslError, match=r"takes an ir\.Function or ir\.Model"):
        model_to_proto("relu")  # type: ignore[arg-type]


# ------------------------------------------------------------------------- performance


def test_to_model_proto_work_is_linear() -> None:
    # (its speed, µs per node, is bench/compile_speed.py's)
    def writing(length: int) -> Any:
        x = ir.Value("x", FLOAT["N", 4])
        current = x
        nodes = []
        for _ in range(length):
            out = ir.Value(f"v{len(nodes)}")
            nodes.append(node("LeakyRelu", [current], [out], alpha=ir.Attr("alpha", K.FLOAT, 0.1)))
            current = out
        current.type = FLOAT["N", 4]
        function = ir.Function("chain", ir.Graph("chain", [x], [current], nodes), opset_imports={"": 18})
        return lambda: model_to_proto(function)

    assert len(writing(10)().graph.node) == 10
    assert_linear(writing, 300, 3_000)


@pytest.mark.invalid_export("onnx's shape inference types a sparse initializer as sparse_tensor, which Add "
                            "refuses; onnxruntime densifies it as the ONNX spec intends")
def test_sparse_initializer_is_read_by_name() -> None:
    sparse = ir.SparseTensor(
        values=ir.Tensor(np.array([2.0, 5.0], np.float32), 1),
        indices=ir.Tensor(np.array([1, 3], np.int64), 7),
        dims=(5,),
    )
    x = ir.Value("x", FLOAT[5])
    weight = ir.Value("weight")
    y = ir.Value("y", FLOAT[5])
    graph = ir.Graph("g", [x], [y], [node("Add", [x, weight], [y])], sparse_initializers={"weight": sparse})
    model = model_to_proto(ir.Function("g", graph, opset_imports={"": 18}))
    # No full check: onnx's shape inference types a sparse initializer as sparse_tensor,
    # which Add rejects, while onnxruntime densifies it as the ONNX spec intends.
    onnx.checker.check_model(model)
    assert model.graph.sparse_initializer[0].values.name == "weight" == model.graph.node[0].input[1]
    np.testing.assert_array_equal(run(model, np.ones(5, np.float32))[0], [1, 3, 1, 6, 1])


def _caller_of(callee: ir.Function, caller_opset: int, caller_op: str) -> ir.Function:
    a = ir.Value("a", FLOAT[2, 4])
    mid = ir.Value("mid")
    b = ir.Value("b", FLOAT[2, 4])
    call = node("leaky", [a], [mid])
    call.domain, call.callee = "this", callee
    own = node(caller_op, [mid, mid] if caller_op == "Add" else [mid], [b])
    return ir.Function("main", ir.Graph("main", [a], [b], [call, own]), opset_imports={"": caller_opset})


def test_caller_on_newer_opset_takes_the_callees_when_its_ops_are_unchanged() -> None:
    # The callee's Constant differs between opsets 18 and 26; the caller's Add does not.
    model = model_to_proto(_caller_of(leaky_function(), max_opset(), "Add"))
    onnx.checker.check_model(model, full_check=True)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 18), ("this", 1)}
    x = np.linspace(-5, 5, 8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(run(model, x)[0], 2 * leaky_oracle(x, 0.1), rtol=1e-6)


def test_incompatible_opsets_of_caller_and_callee_are_an_error() -> None:
    # Both use an op whose schema changed between the two versions (Identity: 16 -> 19+).
    with pytest.raises(ConversionError, match="differs between them") as caught:
        model_to_proto(_caller_of(leaky_function(), max_opset(), "Identity"))
    assert "inline=True" in caught.value.hint


def test_inline_option_writes_no_local_functions() -> None:
    from dsl.script_function import model_to_proto  # Python values and inline=: the facade's options

    callee = leaky_function()
    a = ir.Value("a", FLOAT[3, 4])
    b = ir.Value("b", FLOAT[3, 4])
    call = node("leaky", [a], [b], alpha=ir.Attr("alpha", K.FLOAT, 0.25))
    call.domain, call.callee = "this", callee
    main = ir.Function("main", ir.Graph("main", [a], [b], [call]), opset_imports={"": 18})
    model = model_to_proto(main, inline=True)
    onnx.checker.check_model(model, full_check=True)
    assert not model.functions
    assert "this" not in {o.domain for o in model.opset_import}
    assert {n.op_type for n in model.graph.node} >= {"Add", "LeakyRelu"}
    x = np.linspace(-5, 5, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(run(model, x)[0], leaky_oracle(x, 0.25), rtol=1e-6)


_NUMPY_OPS = {
    "Relu": lambda a: np.maximum(a, 0),
    "Neg": np.negative,
    "Abs": np.abs,
    "Add": np.add,
    "Mul": np.multiply,
    "Sub": np.subtract,
}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(_NUMPY_OPS)),
            st.integers(min_value=0, max_value=10**6),
            st.integers(min_value=0, max_value=10**6),
            st.sampled_from(["", "x", "v", "out", "v_1"]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=0, max_value=10**6),
)
def test_random_graphs_with_clashing_names_check_and_run(steps: list[tuple[str, int, int, str]], pick: int) -> None:
    """Whatever names the IR holds (empty, repeated, equal to the input's), the model is valid and right."""
    x = ir.Value("x", FLOAT[3])
    values = [x]
    arrays = [np.array([-1.5, 0.0, 2.0], np.float32)]
    nodes = []
    for op_type, first, second, name in steps:
        operands = [values[first % len(values)]] + ([values[second % len(values)]] if op_type in ("Add", "Mul", "Sub") else [])
        out = ir.Value(name)
        nodes.append(node(op_type, operands, [out]))
        values.append(out)
        arrays.append(_NUMPY_OPS[op_type](*[arrays[values.index(v)] for v in operands]).astype(np.float32))
    chosen = pick % len(values)
    outputs = [values[-1], values[chosen], values[-1]]
    model = model_to_proto(
        ir.Function("random", ir.Graph("random", [x], outputs, nodes), opset_imports={"": 18}),
        io_types=[FLOAT[3]] * 4,
    )
    onnx.checker.check_model(model, full_check=True)
    got = run(model, arrays[0])
    for result, index in zip(got, [len(values) - 1, chosen, len(values) - 1]):
        np.testing.assert_array_equal(result, arrays[index])


def test_unnamed_required_output_gets_a_name_even_when_unused() -> None:
    x = ir.Value("x", FLOAT[3])
    unused = ir.Value("")  # Abs has one, required output: it cannot be omitted
    y = ir.Value("y", FLOAT[3])
    model = model_to_proto(
        ir.Function("f", ir.Graph("f", [x], [y], [node("Abs", [x], [unused]), node("Neg", [x], [y])]), opset_imports={"": 18})
    )
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.node[0].output[0] != ""


def test_declared_container_types_are_kept_as_written() -> None:
    # A sequence of tensors of any rank is valid for the checker: no inference, no rewrite.
    x = ir.Value("x", FLOAT["N"])
    seq = ir.Value("seq", ir.SequenceType(FLOAT[...]))
    model = model_to_proto(ir.Function("f", ir.Graph("f", [x], [seq], [node("SequenceConstruct", [x], [seq])]), opset_imports={"": 18}))
    onnx.checker.check_model(model, full_check=True)
    assert not model.graph.output[0].type.sequence_type.elem_type.tensor_type.HasField("shape")


def test_ir_model_keeps_its_ir_version_within_what_onnxruntime_loads() -> None:
    def model_at(version: int) -> ir.Model:
        x = ir.Value("x", FLOAT[2])
        y = ir.Value("y", FLOAT[2])
        return ir.Model(ir.Graph("g", [x], [y], [node("Relu", [x], [y])]), opset_imports={"": 17}, ir_version=version)

    assert model_to_proto(model_at(9)).ir_version == 9
    newest = onnx.IR_VERSION  # what onnx writes by default
    lowered = model_to_proto(model_at(newest))
    assert lowered.ir_version == min(newest, max_ir_version())
    np.testing.assert_array_equal(run(lowered, np.array([-1, 1], np.float32))[0], [0, 1])
    assert model_to_proto(model_at(newest), ir_version=newest).ir_version == newest  # asked for explicitly


def test_unread_initializers_and_uncalled_functions_are_added_under_free_names() -> None:
    x = ir.Value("w", ir.TensorType(FLOAT.enum, (2,)))
    relu = ir.Node("Relu", inputs=[x])
    relu.outputs.append(ir.Value("y", ir.TensorType(FLOAT.enum, (2,)), relu))
    main = ir.Function("main", ir.Graph("main", [x], relu.outputs, [relu]), opset_imports={"": 18})
    a = ir.Value("a")
    neg = ir.Node("Neg", inputs=[a])
    neg.outputs.append(ir.Value("b", None, neg))
    library = ir.Function("Negate", ir.Graph("Negate", [a], neg.outputs, [neg]), domain="lib",
                          opset_imports={"": 18})
    dense = ir.Tensor(np.arange(3, dtype=np.float32), FLOAT.enum, "w")  # the input's name
    sparse = ir.SparseTensor(ir.Tensor(np.array([1.5], np.float32), FLOAT.enum, "w"),
                             ir.Tensor(np.array([2], np.int64), INT64.enum), (4,))
    model = model_to_proto(main, functions=[library], initializers=[dense, sparse])
    onnx.checker.check_model(model, full_check=True)
    names = [t.name for t in model.graph.initializer] + [s.values.name for s in model.graph.sparse_initializer]
    assert model.graph.input[0].name == "w" and "w" not in names and len(set(names)) == 2
    assert [f.name for f in model.functions] == ["Negate"]
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(model.graph.initializer[0]), [0, 1, 2])
    np.testing.assert_array_equal(run(model, np.array([-1, 1], np.float32))[0], [0, 1])


def test_an_input_of_undefined_element_type_among_typed_ones_is_an_error() -> None:
    # (The writer tells a model's many typed inputs apart from an untyped one in a few loops
    # over all of them: an element type 0 is as untyped as no type at all.)
    typed, undefined = ir.Value("a", FLOAT[2]), ir.Value("u", ir.TensorType(0, (2,)))
    out = ir.Value("o", FLOAT[2])
    graph = ir.Graph("g", [typed, undefined], [out], [node("Add", [typed, undefined], [out])])
    with pytest.raises(ConversionError, match="input 'u' has no type"):
        model_to_proto(ir.Model(graph, opset_imports={"": 18}))


def _negate(opset: int) -> ir.Function:
    a, b = ir.Value("a", FLOAT[2]), ir.Value("b", FLOAT[2])
    return ir.Function("Negate", ir.Graph("Negate", [a], [b], [node("Neg", [a], [b])]), domain="local",
                       opset_imports={"": opset})


def _called(negate: ir.Function, source: ir.Value, result: ir.Value) -> ir.Node:
    call = node("Negate", [source], [result])
    call.domain, call.callee = "local", negate
    return call


def test_a_model_writes_the_functions_its_graph_calls_though_it_lists_none() -> None:
    # (an ir.Model built by hand need not list its callees; a call in an If branch counts too)
    negate = _negate(18)
    value = np.array([1.5, -2.0], np.float32)
    x, y = ir.Value("x", FLOAT[2]), ir.Value("y", FLOAT[2])
    direct = ir.Graph("g", [x], [y], [_called(negate, x, y)])
    u, flag, z, negated, kept = (ir.Value("u", FLOAT[2]), ir.Value("c", ir.TensorType(onnx.TensorProto.BOOL, ())),
                                 ir.Value("z", FLOAT[2]), ir.Value("n", FLOAT[2]), ir.Value("k", FLOAT[2]))
    choose = node("If", [flag], [z],
                  then_branch=ir.Attr("then_branch", K.GRAPH, ir.Graph("then", [], [negated], [_called(negate, u, negated)])),
                  else_branch=ir.Attr("else_branch", K.GRAPH, ir.Graph("else", [], [kept], [node("Identity", [u], [kept])])))
    in_branch = ir.Graph("h", [u, flag], [z], [choose])
    for graph, feeds, expected in ((direct, [value], -value), (in_branch, [value, np.array(True)], -value)):
        model = model_to_proto(ir.Model(graph, opset_imports={"": 18}))
        assert [(f.domain, f.name) for f in model.functions] == [("local", "Negate")]
        onnx.checker.check_model(model, full_check=True)
        np.testing.assert_array_equal(run(model, *feeds)[0], expected)


def test_the_ir_version_counts_the_opsets_of_model_local_functions() -> None:
    # The caller imports opset 13, its callee the newest the installed onnxruntime loads (Neg
    # is the same in both, so the model keeps 13): the IR version is what onnx's table gives
    # the newer of the two, above the 8 that model-local functions need anyway.
    newest = max_opset()
    if onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", newest)], True) <= 8:
        pytest.skip(f"opset {newest}, the newest the installed onnxruntime loads, needs no IR version above 8")
    x, y, w = ir.Value("x", FLOAT[2]), ir.Value("y", FLOAT[2]), ir.Value("w", FLOAT[2])
    negate = _negate(newest)
    graph = ir.Graph("g", [x], [y], [node("Neg", [x], [w]), _called(negate, w, y)])
    model = model_to_proto(ir.Model(graph, functions=[negate], opset_imports={"": 13}))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 13), ("local", 1)]
    needed = onnx.helper.find_min_ir_version_for([*model.opset_import, *model.functions[0].opset_import], True)
    assert model.ir_version == needed
    onnx.checker.check_model(model, full_check=True)
    value = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(run(model, value)[0], value)
