"""dsl.passes.merge and converter.merge: two models wired into one.

The oracle runs the two models separately in onnxruntime and feeds the first's mapped
outputs to the second; the merged model (checked with ``onnx.checker`` full_check) must
give the same arrays.  Inputs and outputs are matched by position: the first's inputs,
then the second's that the map leaves open; the first's outputs the map does not
consume, then the second's (onnx.compose.merge_models's order).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import converter
from converter.from_onnx import model_from_proto
from dsl import ir
from dsl.errors import ConversionError, DslError, DslNameError, DslTypeError
from dsl.passes.merge import MergePass, merge_models

F = TensorProto.FLOAT
SQUEEZENET = Path(os.path.dirname(onnx.__file__)) / "backend/test/data/light/light_squeezenet.onnx"


def make(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: Sequence[Any] = (), opset: int = 18,
         functions: Sequence[Any] = (), name: str = "g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("local", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=imports, functions=list(functions))
    model.ir_version = 8
    return model


def vi(name: str, shape: list[Any], elem: int = F) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def const(name: str, values: list[float], shape: list[int]) -> Any:
    return helper.make_tensor(name, F, shape, values)


def run(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    initializers = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    assert len(names) == len(inputs), f"model takes {names}, got {len(inputs)} inputs"
    return session.run(None, dict(zip(names, inputs)))


def input_names(model: onnx.ModelProto) -> list[str]:
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def check_merge(first: onnx.ModelProto, second: onnx.ModelProto, io_map: list[tuple[str, str]],
                **options: Any) -> onnx.ModelProto:
    """Merge, check, and compare with running the two parts one after the other."""
    rng = np.random.default_rng(0)

    def example(value: Any) -> np.ndarray:
        dims = [d.dim_value or 2 for d in value.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        return rng.standard_normal(dims).astype(dtype)

    by_name = {i.name: i for i in [*first.graph.input, *second.graph.input]}
    first_in = [example(by_name[n]) for n in input_names(first)]
    mapped = dict((b, a) for a, b in io_map)
    second_open = [n for n in input_names(second) if n not in mapped]
    second_in = {n: example(next(i for i in second.graph.input if i.name == n)) for n in second_open}

    first_out = dict(zip([o.name for o in first.graph.output], run(first, first_in)))
    second_feed = [first_out[mapped[n]] if n in mapped else second_in[n] for n in input_names(second)]
    second_out = run(second, second_feed)
    expected = [first_out[o.name] for o in first.graph.output if o.name not in {a for a, _ in io_map}] + second_out

    merged = converter.merge(first, second, io_map, **options)
    onnx.checker.check_model(merged, full_check=True)
    got = run(merged, first_in + [second_in[n] for n in second_open])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    return merged


def relu_add(name: str = "g") -> onnx.ModelProto:
    """x[1,4] -> h = Relu(x) -> y = h + W."""
    return make(
        [helper.make_node("Relu", ["x"], ["h"], name="n0"), helper.make_node("Add", ["h", "W"], ["y"], name="n1")],
        [vi("x", [1, 4])], [vi("y", [1, 4])], [const("W", [1, 2, 3, 4], [4])], name=name,
    )


def mul_sub() -> onnx.ModelProto:
    """x[1,4] -> h = x * W -> z = h - x (the same names as relu_add: x, h, W, n0, n1)."""
    return make(
        [helper.make_node("Mul", ["x", "W"], ["h"], name="n0"), helper.make_node("Sub", ["h", "x"], ["z"], name="n1")],
        [vi("x", [1, 4])], [vi("z", [1, 4])], [const("W", [0.5, -1, 2, 3], [4])],
    )


# ------------------------------------------------------------------------------ cases


def test_chain_of_two_models() -> None:
    second = make([helper.make_node("Tanh", ["a"], ["b"])], [vi("a", [1, 4])], [vi("b", [1, 4])])
    merged = check_merge(relu_add(), second, [("y", "a")])
    assert input_names(merged) == ["x"] and [o.name for o in merged.graph.output] == ["b"]


def test_side_by_side_keeps_all_inputs_and_outputs() -> None:
    merged = check_merge(relu_add(), mul_sub(), [])
    assert input_names(merged) == ["x", "x_1"]
    assert [o.name for o in merged.graph.output] == ["y", "z"]


def test_clashing_initializer_value_and_node_names_are_renamed() -> None:
    merged = check_merge(relu_add(), mul_sub(), [("y", "x")])
    names = [i.name for i in merged.graph.initializer]
    assert names == ["W", "W_1"]
    node_names = [n.name for n in merged.graph.node]
    assert len(set(node_names)) == len(node_names) == 4


def test_unconsumed_outputs_of_the_first_stay() -> None:
    first = make(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["extra"])],
        [vi("x", [1, 4])], [vi("y", [1, 4]), vi("extra", [1, 4])],
    )
    merged = check_merge(first, mul_sub(), [("y", "x")])
    assert [o.name for o in merged.graph.output] == ["extra", "z"]


def test_if_branch_reading_a_clashing_outer_value() -> None:
    then_branch = helper.make_graph([helper.make_node("Neg", ["h"], ["t"])], "then", [], [vi("t", [1, 4])])
    else_branch = helper.make_graph([helper.make_node("Abs", ["h"], ["e"])], "else", [], [vi("e", [1, 4])])
    second = make(
        [
            helper.make_node("Mul", ["a", "a"], ["h"]),
            helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["out"], then_branch=then_branch, else_branch=else_branch),
        ],
        [vi("a", [1, 4])], [vi("out", [1, 4])], [const("zero", [0.0], [])],
    )
    merged = check_merge(relu_add(), second, [("y", "a")])
    if_node = next(n for n in merged.graph.node if n.op_type == "If")
    mul = next(n for n in merged.graph.node if n.op_type == "Mul")
    assert mul.output[0] == "h_1"
    assert [attr.g.node[0].input[0] for attr in if_node.attribute] == ["h_1", "h_1"]


def local_function(name: str, op: str) -> onnx.FunctionProto:
    return helper.make_function("local", name, ["i"], ["o"], [helper.make_node(op, ["i"], ["o"])],
                                [helper.make_opsetid("", 18)])


def calling(function: onnx.FunctionProto, input_name: str, output_name: str) -> onnx.ModelProto:
    return make([helper.make_node(function.name, [input_name], [output_name], domain="local")],
                [vi(input_name, [1, 4])], [vi(output_name, [1, 4])], functions=[function])


def test_local_functions_with_the_same_name_and_different_bodies() -> None:
    first = calling(local_function("act", "Relu"), "x", "y")
    second = calling(local_function("act", "Neg"), "a", "b")
    merged = check_merge(first, second, [("y", "a")])
    assert sorted(f.name for f in merged.functions) == ["act", "act_1"]
    assert [n.op_type for n in merged.graph.node] == ["act", "act_1"]


def test_identical_local_functions_are_shared() -> None:
    first = calling(local_function("act", "Relu"), "x", "y")
    second = calling(local_function("act", "Relu"), "a", "b")
    merged = check_merge(first, second, [("y", "a")])
    assert [f.name for f in merged.functions] == ["act"]


def test_opset_9_model_after_opset_18_is_converted_up() -> None:
    old = make([helper.make_node("Unsqueeze", ["a"], ["b"], axes=[0])], [vi("a", [1, 4])], [vi("b", [1, 1, 4])],
               opset=9)
    old.ir_version = 4
    merged = check_merge(relu_add(), old, [("y", "a")])
    assert [(o.domain, o.version) for o in merged.opset_import] == [("", 18)]
    unsqueeze = next(n for n in merged.graph.node if n.op_type == "Unsqueeze")
    assert len(unsqueeze.input) == 2 and not unsqueeze.attribute


def test_value_info_and_external_data_are_carried(tmp_path: Path) -> None:
    first, second = relu_add(), mul_sub()
    for model in (first, second):
        model.graph.value_info.append(vi("h", [1, 4]))
    onnx.save(first, str(tmp_path / "a.onnx"), save_as_external_data=True, size_threshold=0, location="a.data")
    merged = converter.merge(tmp_path / "a.onnx", second, [("y", "x")])
    assert sorted(v.name for v in merged.graph.value_info) == ["h", "h_1"]
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in merged.graph.initializer}
    np.testing.assert_array_equal(weights["W"], [1, 2, 3, 4])


def test_an_op_the_version_converter_cannot_take_is_named() -> None:
    old = make([helper.make_node("ImageScaler", ["a"], ["b"], scale=2.0)], [vi("a", [1, 4])], [vi("b", [1, 4])],
               opset=9)
    with pytest.raises(ConversionError, match="opset 9 to 18: the op ImageScaler"):
        converter.merge(relu_add(), old, [("y", "a")])


def test_custom_domain_and_metadata_are_kept() -> None:
    first = relu_add()
    onnx.helper.set_model_props(first, {"author": "first"})
    first.opset_import.add(domain="com.example", version=2)
    second = mul_sub()
    second.opset_import.add(domain="com.example", version=3)
    onnx.helper.set_model_props(second, {"author": "second", "license": "MIT"})
    merged = check_merge(first, second, [("y", "x")])
    assert {o.domain: o.version for o in merged.opset_import}["com.example"] == 3
    assert {p.key: p.value for p in merged.metadata_props} == {"author": "first", "license": "MIT"}


def test_prefixes() -> None:
    merged = check_merge(relu_add(), mul_sub(), [("y", "x")], prefix1="a/", prefix2="b/")
    assert input_names(merged) == ["a/x"]
    assert [i.name for i in merged.graph.initializer] == ["a/W", "b/W"]
    assert [o.name for o in merged.graph.output] == ["b/z"]


def test_squeezenet_behind_a_preprocessing_graph(tmp_path: Path) -> None:
    assert {o.domain: o.version for o in onnx.load(str(SQUEEZENET)).opset_import} == {"": 9}
    preprocess = make(
        [helper.make_node("Mul", ["image", "scale"], ["scaled"]), helper.make_node("Sub", ["scaled", "mean"], ["data"])],
        [vi("image", [1, 3, 224, 224])], [vi("data", [1, 3, 224, 224])],
        [const("scale", [1 / 255], []), const("mean", [0.485, 0.456, 0.406], [3, 1, 1])],
    )
    path = tmp_path / "pre.onnx"
    onnx.save(preprocess, str(path))
    merged = check_merge(preprocess, onnx.load(str(SQUEEZENET)), [("data", "data_0")])
    assert [(o.domain, o.version) for o in merged.opset_import] == [("", 18)]
    again = converter.merge(path, SQUEEZENET, [("data", "data_0")])  # paths work as well
    assert len(again.graph.node) == len(merged.graph.node)


# ----------------------------------------------------------------------------- errors


def test_element_type_mismatch_is_refused() -> None:
    second = make([helper.make_node("Neg", ["a"], ["b"])], [vi("a", [1, 4], TensorProto.DOUBLE)],
                  [vi("b", [1, 4], TensorProto.DOUBLE)])
    with pytest.raises(DslTypeError) as caught:
        converter.merge(relu_add(), second, [("y", "a")])
    message = str(caught.value)
    assert "FLOAT" in message and "DOUBLE" in message and "'y'" in message and "'a'" in message


def test_static_shape_mismatch_is_refused() -> None:
    second = make([helper.make_node("Neg", ["a"], ["b"])], [vi("a", [1, 8])], [vi("b", [1, 8])])
    with pytest.raises(DslTypeError, match=r"\[1, 4\] and \[1, 8\]"):
        converter.merge(relu_add(), second, [("y", "a")])


def test_symbolic_dimensions_are_accepted() -> None:
    second = make([helper.make_node("Neg", ["a"], ["b"])], [vi("a", ["N", 4])], [vi("b", ["N", 4])])
    check_merge(relu_add(), second, [("y", "a")])


def test_unknown_names_are_refused_with_close_matches() -> None:
    with pytest.raises(DslNameError, match=r"'yy'.*not an output of the first model") as caught:
        converter.merge(relu_add(), mul_sub(), [("yy", "x")])
    assert "did you mean 'y'" in str(caught.value)
    with pytest.raises(DslNameError, match="not an input of the second model"):
        converter.merge(relu_add(), mul_sub(), [("y", "xx")])


def test_an_input_mapped_twice_is_refused() -> None:
    first = make([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y2"])],
                 [vi("x", [1, 4])], [vi("y", [1, 4]), vi("y2", [1, 4])])
    with pytest.raises(DslNameError, match="'x' twice"):
        converter.merge(first, mul_sub(), [("y", "x"), ("y2", "x")])


def test_the_pass_refuses_mixed_opsets_and_itself() -> None:
    old = make([helper.make_node("Relu", ["a"], ["b"])], [vi("a", [1, 4])], [vi("b", [1, 4])], opset=13)
    with pytest.raises(ConversionError, match="opset 18 and the second opset 13"):
        merge_models(model_from_proto(relu_add()), model_from_proto(old), [("y", "a")])
    model = model_from_proto(relu_add())
    with pytest.raises(DslError, match="itself"):
        MergePass(model)(model)


def test_merge_pass_result() -> None:
    result = MergePass(model_from_proto(mul_sub()), [("y", "x")])(model_from_proto(relu_add()))
    assert result.modified and isinstance(result.target, ir.Model)
    assert [v.name for v in result.target.graph.outputs] == ["z"]


def test_cli_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from converter.cli import main

    onnx.save(relu_add(), str(tmp_path / "a.onnx"))
    onnx.save(mul_sub(), str(tmp_path / "b.onnx"))
    out = tmp_path / "c.onnx"
    assert main(["merge", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--map", "y:x", "-o", str(out)]) == 0
    assert "outputs: z" in capsys.readouterr().out
    merged = onnx.load(str(out))
    onnx.checker.check_model(merged, full_check=True)
    x = np.array([[-1, 2, -3, 4]], np.float32)
    y = np.maximum(x, 0) + np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_allclose(run(merged, [x])[0], y * np.array([0.5, -1, 2, 3], np.float32) - y)
    assert main(["merge", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--map", "y", "-o", str(out)]) == 2
    assert main(["merge", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--map", "q:x", "-o", str(out)]) == 2
    assert "'q'" in capsys.readouterr().err


def sparse_add(values: list[float]) -> onnx.ModelProto:
    """x[4] -> y = x + S, with S a sparse initializer (two of four entries set)."""
    dense_values = helper.make_tensor("S", F, [2], values)
    indices = helper.make_tensor("S_indices", TensorProto.INT64, [2], [1, 3])
    model = make([helper.make_node("Add", ["x", "S"], ["y"], name="n0")], [vi("x", [4])], [vi("y", [4])])
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(dense_values, indices, [4]))
    return model


def test_clashing_sparse_initializers_are_renamed() -> None:
    # onnx's full check refuses any sparse initializer read by a node (shape inference
    # types it sparse_tensor), the inputs too: the plain check and onnxruntime judge here.
    first, second = sparse_add([1.0, 2.0]), sparse_add([10.0, 20.0])
    merged = converter.merge(first, second, [("y", "x")])
    onnx.checker.check_model(merged)
    sparse = merged.graph.sparse_initializer
    by_name = {s.values.name: list(onnx.numpy_helper.to_array(s.values)) for s in sparse}
    assert by_name == {"S": [1.0, 2.0], "S_1": [10.0, 20.0]}
    assert [n.input[1] for n in merged.graph.node] == ["S", "S_1"]
    x = np.array([1.0, -1.0, 2.0, -2.0], np.float32)
    np.testing.assert_allclose(run(merged, [x])[0], run(second, run(first, [x]))[0])


@pytest.mark.slow
def test_cli_writes_a_merged_model_over_2_gb_with_external_data(tmp_path: Path) -> None:
    # Two models of 1.1 GB of weights each (written with external data, as such files
    # come): the merge is over protobuf's 2 GB limit, so its weights go to a side file.
    from converter.cli import main

    count = 290_000_000  # float32: 1.16 GB each
    for index, name in enumerate(("a", "b")):
        weights = np.zeros(count, np.float32)
        weights[:4] = np.arange(4, dtype=np.float32) + 10 * index
        weights.tofile(tmp_path / f"{name}.data")  # (what onnx.save writes, without its copies)
        del weights
        external = TensorProto(name="W", data_type=F, dims=[count])
        external.data_location = TensorProto.EXTERNAL
        external.external_data.add(key="location", value=f"{name}.data")
        model = make(
            [helper.make_node("Slice", ["W", "start", "stop"], ["w4"]), helper.make_node("Add", ["x", "w4"], ["y"])],
            [vi("x", [4])], [vi("y", [4])],
            [external, onnx.numpy_helper.from_array(np.array([0]), "start"),
             onnx.numpy_helper.from_array(np.array([4]), "stop")],
        )
        onnx.save(model, str(tmp_path / f"{name}.onnx"))
    out = tmp_path / "c.onnx"
    assert main(["merge", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--map", "y:x", "-o", str(out)]) == 0
    assert out.stat().st_size < 2**20 and (tmp_path / "c.onnx.data").stat().st_size >= 2 * count * 4
    onnx.checker.check_model(str(out), full_check=True)
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(y, 1 + np.arange(4) + np.arange(4) + 10)


def chain_of(length: int, typed: bool = False) -> onnx.ModelProto:
    """y = f(x): ``length`` Add/Relu/Mul nodes in a chain (the shape of bench/compose_speed.py's)."""
    ops = ("Add", "Relu", "Mul")
    nodes, previous = [], "x"
    for index in range(length):
        output = "y" if index == length - 1 else f"v{index}"
        inputs = [previous] if ops[index % 3] == "Relu" else [previous, f"c{index % 2}"]
        nodes.append(helper.make_node(ops[index % 3], inputs, [output], name=f"n{index}"))
        previous = output
    model = make(nodes, [vi("x", [4])], [vi("y", [4])], [const("c0", [0.5] * 4, [4]), const("c1", [-1.5] * 4, [4])])
    if typed:
        model.graph.value_info.extend(vi(f"v{index}", [4]) for index in range(length - 1))
    return model


def test_merge_work_is_linear_in_the_size_of_the_models() -> None:
    """Reading, renaming every clashing name and writing: the work per node stays flat
    from 300 to 3 000 nodes a model (counted, not timed: see tests/work_count.py)."""
    from tests.work_count import assert_linear

    def merging(length: int) -> Any:
        first, second = chain_of(length, typed=True), chain_of(length, typed=True)
        return lambda: converter.merge(first, second, io_map=[("y", "x")])

    merged = merging(30)()
    assert len(merged.graph.node) == 60 and len(merged.graph.value_info) == 58
    assert_linear(merging, 300, 3_000)


def test_a_chain_merged_with_a_copy_of_itself_computes_both() -> None:
    """The bench's case: every name of the second model clashes."""
    merged = check_merge(chain_of(40, typed=True), chain_of(40, typed=True), [("y", "x")])
    names = [n.name for n in merged.graph.node]
    assert len(set(names)) == 80 and names[40:] == [f"n{i}_1" for i in range(40)]


# ------------------------------------------------- values by name from the reader


def _with_if(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with an If whose branches read its value ``h``."""
    then_branch = helper.make_graph([helper.make_node("Neg", ["h"], ["t"])], "then", [], [vi("t", [1, 4])])
    else_branch = helper.make_graph([helper.make_node("Abs", ["h"], ["e"])], "else", [], [vi("e", [1, 4])])
    model.graph.node.extend([
        helper.make_node("ReduceSum", ["h"], ["h_sum"], keepdims=0),
        helper.make_node("Cast", ["h_sum"], ["c"], to=TensorProto.BOOL),
        helper.make_node("If", ["c"], ["branched"], then_branch=then_branch, else_branch=else_branch),
    ])
    model.graph.output.append(vi("branched", [1, 4]))
    return model


def test_the_reader_lists_every_value_by_name_or_says_it_cannot() -> None:
    from converter.from_onnx import model_and_values_from_proto
    from dsl.passes.prefix import graph_values

    model, values = model_and_values_from_proto(relu_add())
    assert values is not None
    assert list(values) == ["W", "x", "h", "y"] and all(values[name].name == name for name in values)
    assert set(map(id, values.values())) == set(map(id, graph_values(model.graph)))
    assert model_and_values_from_proto(_with_if(relu_add()))[1] is None  # (the branches' values are not listed)
    detached = relu_add()
    detached.graph.value_info.append(vi("nobody", [1]))  # (describes a value nothing defines)
    assert model_and_values_from_proto(detached)[1] is None


@pytest.mark.parametrize("options", [{}, {"prefix1": "a_"}, {"prefix2": "b_"}, {"prefix1": "x", "prefix2": "x"}])
@pytest.mark.parametrize("shape", ["plain", "if", "detached value_info"])
def test_merging_with_the_readers_values_is_merging_without(options: dict[str, str], shape: str) -> None:
    def model(maker: Any) -> onnx.ModelProto:
        proto = maker()
        if shape == "if":
            proto = _with_if(proto)
        elif shape == "detached value_info":
            proto.graph.value_info.append(vi("h_1", [1, 4]))
        return proto

    first, second = model(relu_add), model(mul_sub)
    walked = merge_models(model_from_proto(first), model_from_proto(second), [("y", "x")], **options)
    from converter.to_onnx import model_to_proto

    assert converter.merge(first, second, [("y", "x")], **options) == model_to_proto(walked)
    check_merge(first, second, [("y", "x")], **options)
