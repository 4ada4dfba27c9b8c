"""converter.to_python: readable, valid Python whose compilation rebuilds the model.

Generated source is parsed with ``ast`` for every backend node case; targeted models
check the spellings (operators, names, weights, functions) and, compiled back with
``@script``, that the result runs in onnxruntime like the original and is isomorphic.
"""

from __future__ import annotations

import ast
import keyword
import os

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.compare import first_difference
from converter.from_onnx import model_from_proto
from converter.python_source import model_to_python, save_weights
from dsl.errors import ConversionError
from dsl.frontend.weights import load_weights
from tests.proto_edits import node_case_models
from tests.roundtrip import round_trip, run
from tests.test_frontend_control_flow import blocks, define


def _function_defs(source: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}


def test_every_node_case_gives_valid_python() -> None:
    for name, case in node_case_models().items():
        source = converter.to_python(case.model)
        try:
            ast.parse(source)
        except SyntaxError as error:  # pragma: no cover - the message is the point
            raise AssertionError(f"{name}: {error}\n{source}") from None


def _model(nodes, inputs, outputs, initializers=(), opset=18, functions=(), extra_opsets=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, initializer=list(initializers))
    return helper.make_model(
        graph, functions=list(functions),
        opset_imports=[helper.make_opsetid("", opset), *extra_opsets],
    )


def _float(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_python_operators_only_where_they_mean_the_same_op() -> None:
    model = _model(
        [
            helper.make_node("Add", ["a", "b"], ["s"]),
            helper.make_node("MatMul", ["s", "b"], ["m"]),
            helper.make_node("Neg", ["m"], ["n"]),
            helper.make_node("Mod", ["n", "a"], ["r"], fmod=1),  # fmod: keeps op.Mod
            helper.make_node("Less", ["r", "a"], ["lt"]),
            helper.make_node("Not", ["lt"], ["y"]),
        ],
        [_float("a", [2, 2]), _float("b", [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [2, 2])],
    )
    source = converter.to_python(model)
    assert "s = a + b" in source and "m = s @ b" in source and "n = -m" in source
    assert "r = op.Mod(n, a, fmod=1)" in source and "lt = r < a" in source and "y = ~lt" in source
    assert "def main_graph(a: FLOAT[2, 2], b: FLOAT[2, 2]) -> BOOL[2, 2]:" in source


def test_names_are_valid_and_never_shadow_what_the_code_uses() -> None:
    awkward = ["input", "lambda", "op", "np", "1x", "a.b/c", "FLOAT", "script", "weights", "", "_"]
    nodes = []
    previous = "x"
    for index, name in enumerate(awkward):
        out = name if name else ""
        if not out:
            continue
        nodes.append(helper.make_node("Relu", [previous], [out], name=f"n{index}"))
        previous = out
    model = _model(nodes, [_float("x", [1])], [_float(previous, [1])])
    source = converter.to_python(model)
    main = _function_defs(source)["main_graph"]
    assigned = [t.id for stmt in main.body if isinstance(stmt, ast.Assign) for t in stmt.targets]
    assert len(set(assigned)) == len(assigned)
    import builtins

    for name in assigned:
        assert name.isidentifier() and not keyword.iskeyword(name)
        assert name not in dir(builtins) and name not in {"op", "np", "FLOAT", "script", "weights", "_"}
    assert "input_ = op.Relu(x)" in source and "lambda_ = op.Relu(input_)" in source


def test_small_tensors_inline_large_ones_in_the_weights_file(tmp_path) -> None:
    small = np.array([1.5, -2.0, np.nan, np.inf], np.float32)
    large = np.arange(100, dtype=np.float32).reshape(2, 50)
    bf16 = np.linspace(-1, 1, 40).astype(ml_dtypes.bfloat16)
    model = _model(
        [helper.make_node("Add", ["x", "small"], ["a"]), helper.make_node("MatMul", ["a4", "large"], ["m"]),
         helper.make_node("Reshape", ["a", "shape"], ["a4"]),
         helper.make_node("Cast", ["bf"], ["bf32"], to=TensorProto.FLOAT),
         helper.make_node("ReduceSum", ["bf32"], ["bsum"], keepdims=0),
         helper.make_node("Add", ["m", "bsum"], ["y"])],
        [_float("x", [4])], [_float("y", [2, 50])],
        initializers=[numpy_helper.from_array(small, "small"), numpy_helper.from_array(large, "large"),
                      numpy_helper.from_array(np.array([2, 2], np.int64), "shape"),
                      numpy_helper.from_array(bf16, "bf")],
    )
    weights = tmp_path / "m.npz"
    source = converter.to_python(model, weights, source_path=tmp_path / "m.py")
    assert "small = initializer(np.array([1.5, -2.0, float('nan'), float('inf')], dtype=np.float32)" in source
    assert "large = initializer(weights['large'], name='large')" in source
    assert "weights = load_weights(__file__, 'm.npz')" in source
    assert "y = m + bsum" in source and "to=FLOAT" in source
    stored = load_weights(tmp_path / "m.py", "m.npz")
    assert stored["large"].dtype == np.float32 and np.array_equal(stored["large"], large)
    assert stored["bf"].dtype == bf16.dtype and stored["bf"].tobytes() == bf16.tobytes()


def test_weights_file_keeps_ml_dtypes_bits(tmp_path) -> None:
    arrays = {
        "f8": np.array([0.5, -448, 0.0], ml_dtypes.float8_e4m3fn),
        "i4": np.array([-8, 7], ml_dtypes.int4),
        "plain": np.arange(3, dtype=np.int16),
    }
    save_weights(tmp_path / "w.npz", arrays)
    loaded = load_weights(tmp_path / "anything.py", "w.npz")
    for key, array in arrays.items():
        assert loaded[key].dtype == array.dtype and loaded[key].tobytes() == array.tobytes()


def test_functions_subgraphs_and_custom_domains_are_spelled_out() -> None:
    function = helper.make_function(
        "custom.lib", "Scale", ["a"], ["b"],
        [helper.make_node("Constant", [], ["k"], value_float=2.0),
         helper.make_node("Mul", ["a", "k"], ["m"]),
         helper.make_node("LeakyRelu", ["m"], ["b"])],
        [helper.make_opsetid("", 18)], attributes=["alpha"],
    )
    function.node[2].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    then_graph = helper.make_graph([], "then_branch", [], [_float("x", [2])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else_branch", [],
                                   [_float("e", [2])])
    model = _model(
        [helper.make_node("Scale", ["x"], ["s"], domain="custom.lib", alpha=0.5),
         helper.make_node("ReduceSum", ["s"], ["total"], keepdims=0),
         helper.make_node("Greater", ["total", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph),
         helper.make_node("Foo", ["y"], ["z"], domain="com.example", mode="fast")],
        [_float("x", [2])], [_float("z", [2])],
        initializers=[numpy_helper.from_array(np.array(0, np.float32), "zero")],
        functions=[function],
        extra_opsets=[helper.make_opsetid("custom.lib", 1), helper.make_opsetid("com.example", 3)],
    )
    source = converter.to_python(model)
    defs = _function_defs(source)
    assert list(defs)[:1] == ["Scale"]  # callees before callers
    assert "@script(op, domain='custom.lib')" in source
    assert "def Scale(a, alpha: float):" in source and "b = op.LeakyRelu(m, alpha=alpha)" in source
    assert "s = Scale(x, alpha=0.5)" in source
    # This If reads ``x`` from outside as its then-branch output: Python's if would need a
    # copy (an Identity), so it is written with @graph() branches.
    assert "@graph()" in source and "def then_branch() -> FLOAT[2]:" in source
    assert "y = op.If(c, else_branch=else_branch, then_branch=then_branch)" in source
    assert "com_example = Opset('com.example', 3)" in source and "z = com_example.Foo(y, mode='fast')" in source


def test_errors_for_what_python_cannot_spell() -> None:
    model = _model([helper.make_node("Bad-Op", ["x"], ["y"], domain="weird")], [_float("x", [1])],
                   [_float("y", [1])], extra_opsets=[helper.make_opsetid("weird", 1)])
    with pytest.raises(ConversionError, match="not a Python identifier"):
        converter.to_python(model)
    with pytest.raises(ConversionError, match="'keep' or 'drop'"):
        model_to_python(model_from_proto(model), initializer_inputs="maybe")


# ------------------------------------------------------------- compiled round trips


def _check_round_trip(model: onnx.ModelProto, feeds: list[np.ndarray], tmp_path) -> str:
    onnx.checker.check_model(model, full_check=True)
    source, rebuilt = round_trip(model, str(tmp_path))
    assert first_difference(model, rebuilt) is None, first_difference(model, rebuilt)
    expected = run(model, feeds)
    got = run(rebuilt, feeds)
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e, g)
    return source


def test_round_trip_of_functions_subgraphs_and_weights(tmp_path) -> None:
    function = helper.make_function(
        "custom.lib", "Scale", ["a"], ["b"],
        [helper.make_node("Constant", [], ["k"], value_float=2.0),
         helper.make_node("Mul", ["a", "k"], ["m"]),
         helper.make_node("LeakyRelu", ["m"], ["b"])],
        [helper.make_opsetid("", 18)], attributes=["alpha"],
    )
    function.node[2].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    then_graph = helper.make_graph([helper.make_node("Add", ["s", "w"], ["t"])], "then_branch", [], [_float("t", [20])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["s"], ["e"])], "else_branch", [], [_float("e", [20])])
    weight = np.linspace(-1, 1, 20).astype(np.float32)
    model = _model(
        [helper.make_node("Scale", ["x"], ["s"], domain="custom.lib", alpha=0.5),
         helper.make_node("ReduceSum", ["s"], ["total"], keepdims=0),
         helper.make_node("Greater", ["total", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph),
         helper.make_node("TopK", ["y", "k"], ["values", "indices"], axis=0)],
        [_float("x", [20])],
        [_float("values", [3]), helper.make_tensor_value_info("indices", TensorProto.INT64, [3])],
        initializers=[numpy_helper.from_array(np.array(0, np.float32), "zero"),
                      numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array([3], np.int64), "k")],
        functions=[function], extra_opsets=[helper.make_opsetid("custom.lib", 1)],
    )
    for sign in (1, -1):
        feeds = [sign * np.arange(20, dtype=np.float32)]
        source = _check_round_trip(model, feeds, tmp_path)
    assert "w = initializer(weights['w'], name='w')" in source


def test_round_trip_keeps_initializers_that_are_inputs_in_order(tmp_path) -> None:
    # IR 3 style: weights listed as inputs, one of them before a plain input.
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1), helper.make_node("Add", ["h", "z"], ["y"])],
        "g", [_float("w", [3, 4]), _float("x", [2, 4]), _float("b", [3]), _float("z", [2, 3])],
        [_float("y", [2, 3])],
        initializer=[numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
                     numpy_helper.from_array(np.array([1, 2, 3], np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    feeds = [np.arange(8, dtype=np.float32).reshape(2, 4), np.ones((2, 3), np.float32)]  # x and z
    source = _check_round_trip(model, feeds, tmp_path)
    assert "def g(w: FLOAT[3, 4] = w, *, x: FLOAT[2, 4], b: FLOAT[3] = b, z: FLOAT[2, 3])" in source
    # "drop" writes the IR >= 4 reading: plain initializers, not inputs.
    dropped = model_to_python(model_from_proto(model), initializer_inputs="drop")
    assert "def g(x: FLOAT[2, 4], z: FLOAT[2, 3])" in dropped


def test_round_trip_of_omitted_outputs_and_inputs(tmp_path) -> None:
    model = _model(
        [helper.make_node("Clip", ["x", "", "high"], ["c"]),
         helper.make_node("LSTM", ["seq", "W", "R"], ["", "h"], hidden_size=2)],
        [_float("x", [3]), _float("seq", [1, 1, 2])],
        [_float("c", [3]), _float("h", [1, 1, 2])],
        initializers=[numpy_helper.from_array(np.array(0.5, np.float32), "high"),
                      numpy_helper.from_array(np.full((1, 8, 2), 0.1, np.float32), "W"),
                      numpy_helper.from_array(np.full((1, 8, 2), 0.2, np.float32), "R")],
    )
    source = _check_round_trip(model, [np.array([0, 1, 2], np.float32), np.ones((1, 1, 2), np.float32)], tmp_path)
    assert "c = op.Clip(x, None, high)" in source and "_, h = op.LSTM(seq, W, R, hidden_size=2)" in source


def test_cli_to_python_then_compile(tmp_path, capsys) -> None:
    from converter.cli import main

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")
    source_path = tmp_path / "squeezenet.py"
    assert main(["to-python", path, "-o", str(source_path)]) == 0
    assert (tmp_path / "squeezenet.npz").exists()
    assert main(["compile", f"{source_path}:squeezenet_old", "-o", str(tmp_path / "back.onnx")]) == 0
    assert converter.isomorphic(onnx.load(path), onnx.load(tmp_path / "back.onnx"))
    assert main(["compile", str(source_path), "-o", str(tmp_path / "again.onnx")]) == 0
    assert main(["compile", f"{source_path}:missing", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "has no @script function 'missing'" in capsys.readouterr().err
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x12\xff")
    assert main(["to-python", str(broken)]) == 2
    assert "broken.onnx" in capsys.readouterr().err


def _if_model(condition_node: onnx.NodeProto, extra_opsets=()) -> onnx.ModelProto:
    then_graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["doubled"]), helper.make_node("Relu", ["doubled"], ["t"])],
        "then_branch", [], [_float("t", [3])],
    )
    else_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else_branch", [], [_float("e", [3])])
    return _model(
        [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0), condition_node,
         helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph)],
        [_float("x", [3])], [_float("y", [3])],
        initializers=[numpy_helper.from_array(np.array(0, np.float32), "zero")], extra_opsets=extra_opsets,
    )


def test_if_is_written_as_python_if(tmp_path) -> None:
    model = _if_model(helper.make_node("Greater", ["total", "zero"], ["c"]))
    for feed in (np.array([1, 2, 3], np.float32), np.array([-1, -2, 0], np.float32)):
        source = _check_round_trip(model, [feed], tmp_path)
    assert "    if c:\n        doubled = x + x\n        y = op.Relu(doubled)\n    else:\n        y = -x\n" in source
    assert "@graph" not in source


def test_if_falls_back_to_graph_functions_when_python_if_would_change_it(tmp_path) -> None:
    # The condition's type is unknown (a custom op): ``if c:`` would make the compiler cast it.
    model = _if_model(helper.make_node("Positive", ["total", "zero"], ["c"], domain="com.example"),
                      [helper.make_opsetid("com.example", 1)])
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "y = op.If(c, else_branch=else_branch, then_branch=then_branch)" in source
    assert "def then_branch() -> FLOAT[3]:" in source
    assert first_difference(model, rebuilt) is None


def test_round_trip_of_function_attribute_parameters(tmp_path) -> None:
    function = helper.make_function(
        "custom.lib", "Scale", ["a"], ["b"],
        [helper.make_node("Constant", [], ["k"]), helper.make_node("CastLike", ["k", "a"], ["kf"]),
         helper.make_node("Mul", ["a", "kf"], ["m"]), helper.make_node("LeakyRelu", ["m"], ["b"])],
        [helper.make_opsetid("", 18)], attributes=["alpha"],
    )
    function.node[0].attribute.append(helper.make_attribute_ref("value_int", onnx.AttributeProto.INT))
    function.node[0].attribute[0].ref_attr_name = "beta"
    function.node[3].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    function.attribute_proto.append(helper.make_attribute("beta", 2))
    model = _model([helper.make_node("Scale", ["x"], ["y"], domain="custom.lib", alpha=0.5)],
                   [_float("x", [3])], [_float("y", [3])], functions=[function],
                   extra_opsets=[helper.make_opsetid("custom.lib", 1)])
    source = _check_round_trip(model, [np.array([-1, 0, 2], np.float32)], tmp_path)
    assert "def Scale(a, alpha: float, beta: int = 2):" in source
    assert "k = op.Constant(value_int=beta)" in source and "y = Scale(x, alpha=0.5)" in source


def test_importing_converter_does_not_import_onnx() -> None:
    import subprocess
    import sys

    code = "import converter, sys; print('onnx' in sys.modules, callable(converter.to_python))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert result.stdout.split() == ["False", "True"]


_NAME_TEXT = st.text(min_size=0, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(names=st.lists(_NAME_TEXT, min_size=4, max_size=4, unique=True))
def test_any_value_names_give_valid_python_that_round_trips(names: list[str], tmp_path) -> None:
    # Arbitrary (unique, possibly empty-looking or non-ASCII) value names must become
    # distinct identifiers; the compiled model is the same graph.
    x, weight, hidden, y = (name or f"fallback{i}" for i, name in enumerate(names))
    model = _model(
        [helper.make_node("Mul", [x, weight], [hidden]), helper.make_node("Softplus", [hidden], [y])],
        [_float(x, [2])], [_float(y, [2])],
        initializers=[numpy_helper.from_array(np.array([0.5, -2.0], np.float32), weight)],
    )
    source, rebuilt = round_trip(model, str(tmp_path), "names")
    ast.parse(source)
    assert first_difference(model, rebuilt) is None
    np.testing.assert_array_equal(run(model, [np.array([1, 2], np.float32)])[0],
                                  run(rebuilt, [np.array([1, 2], np.float32)])[0])


def test_round_trip_of_sparse_initializers_and_attributes(tmp_path) -> None:
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "s"),
                                       numpy_helper.from_array(np.array([0, 3], np.int64), "s_indices"), [2, 2])
    constant = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0], np.float32), "cv"),
                                         numpy_helper.from_array(np.array([1], np.int64), "ci"), [4])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "s"], ["y"]), helper.make_node("Constant", [], ["c"], sparse_value=constant)],
        "g", [_float("x", [2, 2])], [_float("y", [2, 2]), _float("c", [4])], sparse_initializer=[sparse],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "s = sparse_initializer(np.array([1.0, 2.0], dtype=np.float32), np.array([0, 3], dtype=np.int64)" in source
    assert "sparse_value=sparse_tensor(" in source
    assert first_difference(model, rebuilt) is None  # onnxruntime cannot run sparse initializers of this shape
    assert len(rebuilt.graph.sparse_initializer) == 1 and not rebuilt.graph.initializer


def test_round_trip_keeps_model_metadata(tmp_path) -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_float("x", [2])], [_float("y", [2])])
    model.producer_name, model.producer_version, model.doc_string = "exporter", "2.1", "A model.\nTwo lines."
    model.graph.doc_string = "the graph"
    helper.set_model_props(model, {"license": "MIT", "author": "someone"})
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "main_graph.model_options = {" in source and "'metadata_props': {'license': 'MIT'" in source
    assert first_difference(model, rebuilt, check_metadata=True) is None
    assert rebuilt.producer_version == "2.1"


def test_round_trip_keeps_unread_weights_and_uncalled_functions(tmp_path) -> None:
    """Dead weights and library functions are part of the model: they come back (listed in
    model_options, since the compiled body would not reach them), under free names."""
    # (the input "class" cannot keep its name in Python; the weight's name is what Python would make of it)
    unused = numpy_helper.from_array(np.arange(20, dtype=np.float32), "class_")
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.5], np.float32), "s"),
        numpy_helper.from_array(np.array([3], np.int64), "s_indices"), [4])
    called = helper.make_function("lib", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                                  [helper.make_opsetid("", 18)])
    uncalled = helper.make_function("lib", "Negate", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])],
                                    [helper.make_opsetid("", 18)])
    graph = helper.make_graph([helper.make_node("Twice", ["class"], ["y"], domain="lib")], "g", [_float("class", [2])],
                              [_float("y", [2])], initializer=[unused], sparse_initializer=[sparse])
    model = helper.make_model(graph, functions=[called, uncalled],
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("lib", 1)])
    onnx.checker.check_model(model, full_check=True)
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "'functions': [Negate]," in source and "'initializers': [" in source
    assert first_difference(model, rebuilt) is None
    onnx.checker.check_model(rebuilt, full_check=True)
    assert sorted(f.name for f in rebuilt.functions) == ["Negate", "Twice"]
    kept = {t.name: numpy_helper.to_array(t) for t in rebuilt.graph.initializer}
    # (the weight took the Python name "class_" first; the input gets its model name back when written)
    assert list(kept) == ["class_"] and rebuilt.graph.input[0].name == "class"
    np.testing.assert_array_equal(next(iter(kept.values())), np.arange(20, dtype=np.float32))
    np.testing.assert_array_equal(run(rebuilt, [np.array([1.0, 2.0], np.float32)])[0], [2.0, 4.0])


def test_to_model_proto_refuses_what_is_not_a_function_or_a_weight() -> None:
    from dsl import FLOAT, DslTypeError, script
    from dsl import opset18 as op

    @script()
    def relu(x: FLOAT[2]) -> FLOAT[2]:
        return op.Relu(x)

    with pytest.raises(DslTypeError, match="functions= takes @script functions"):
        relu.to_model_proto(functions=[abs])
    with pytest.raises(DslTypeError, match=r"initializers= takes dsl\.initializer"):
        relu.to_model_proto(initializers=[np.ones(2, np.float32)])


# --------------------------------------------------------------------- structured loops


def _scalar(name: str, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, [])


def _body(nodes, carried: list[str], outputs: list[str], iteration: str = "i", condition: str = "cond",
          elem: int = TensorProto.FLOAT) -> onnx.GraphProto:
    """A Loop body (iteration, condition, carried...) -> (condition out, carried out...)."""
    inputs = [_scalar(iteration, TensorProto.INT64), _scalar(condition, TensorProto.BOOL)]
    inputs += [helper.make_tensor_value_info(name, elem, None) for name in carried]
    outs = [_scalar(outputs[0], TensorProto.BOOL)]
    outs += [helper.make_tensor_value_info(name, elem, None) for name in outputs[1:]]
    return helper.make_graph(nodes, "loop_body", inputs, outs)


def _constant(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))


def _for_body() -> onnx.GraphProto:
    return _body(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["acc", "fi"], ["acc_out"])],
        ["acc"], ["cond_out", "acc_out"],
    )


def _loop_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.strip().startswith(("for ", "while ", "if "))]


def test_loop_for_range_is_written_as_python_for(tmp_path) -> None:
    model = _model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=_for_body())],
                   [_float("x", [3]), _scalar("n", TensorProto.INT64)], [_float("y", [3])])
    x = np.array([1, 2, 3], np.float32)
    for n in (4, 0, -2):  # a trip count <= 0 runs no iteration, as range(n) does
        source = _check_round_trip(model, [x, np.array(n, np.int64)], tmp_path)
    assert "for i in range(n):" in source and "op.Loop" not in source and "@graph" not in source
    assert run(model, [x, np.array(4, np.int64)])[0].tolist() == (x + 6).tolist()


def test_loop_with_condition_input_is_a_for_with_a_guard(tmp_path) -> None:
    # The backend's loop11/loop13 form: Loop(n, cond) whose body passes its condition through.
    model = _model([helper.make_node("Loop", ["n", "go", "x"], ["y"], body=_for_body())],
                   [_float("x", [3]), _scalar("n", TensorProto.INT64), _scalar("go", TensorProto.BOOL)],
                   [_float("y", [3])])
    x = np.array([1, 2, 3], np.float32)
    for go in (True, False):
        source = _check_round_trip(model, [x, np.array(5, np.int64), np.array(go)], tmp_path)
    assert _loop_lines(source) == ["for i in range(n):", "if not go:"]
    assert "op.Loop" not in source


def test_loop_while_is_written_as_python_while(tmp_path) -> None:
    # The body's condition is recomputed from a carried value, whose shape the compiler does
    # not know, so it is reshaped to a scalar: exactly what ``while keep_going:`` compiles to.
    body = _body(
        [_constant("one", np.array(1.5, np.float32)),
         helper.make_node("Add", ["v", "one"], ["v_out"]),
         helper.make_node("Less", ["v_out", "limit"], ["below"]),
         _constant("no_dims", np.zeros(0, np.int64)),
         helper.make_node("Reshape", ["below", "no_dims"], ["cond_out"])],
        ["v"], ["cond_out", "v_out"],
    )
    model = _model([helper.make_node("Less", ["x", "limit"], ["start"]),
                    helper.make_node("Loop", ["", "start", "x"], ["y"], body=body)],
                   [_scalar("x"), _scalar("limit")], [_scalar("y")])
    for x in (0.0, 10.0):
        source = _check_round_trip(model, [np.array(x, np.float32), np.array(7, np.float32)], tmp_path)
    assert "while keep_going:" in source and "keep_going = below" in source
    assert "op.Loop" not in source and "Reshape" not in source
    assert run(model, [np.array(0.0, np.float32), np.array(7, np.float32)])[0] == np.float32(7.5)


def test_loop_for_with_break(tmp_path) -> None:
    body = _body(
        [_constant("two", np.array(2, np.float32)),
         helper.make_node("Mul", ["v", "two"], ["v_out"]),
         helper.make_node("ReduceMax", ["v_out"], ["largest"], keepdims=0),
         helper.make_node("Greater", ["largest", "limit"], ["big"]),
         helper.make_node("Not", ["big"], ["small"]),
         _constant("no_dims", np.zeros(0, np.int64)),
         helper.make_node("Reshape", ["small", "no_dims"], ["cond_out"])],
        ["v"], ["cond_out", "v_out"],
    )
    model = _model([_constant("true", np.array(True)),
                    helper.make_node("Loop", ["n", "true", "x"], ["y"], body=body)],
                   [_float("x", [2]), _scalar("n", TensorProto.INT64), _scalar("limit")], [_float("y", [2])])
    x = np.array([1, 3], np.float32)
    for n, limit in ((10, 20.0), (2, 20.0), (0, 1.0)):
        source = _check_round_trip(model, [x, np.array(n, np.int64), np.array(limit, np.float32)], tmp_path)
    assert _loop_lines(source) == ["for i in range(n):", "if big:"]
    assert "break" in source and "op.Loop" not in source
    assert run(model, [x, np.array(10, np.int64), np.array(20, np.float32)])[0].tolist() == [8, 24]  # 24 > 20: stop


def test_nested_loops_and_a_loop_inside_if(tmp_path) -> None:
    inner = _body(
        [helper.make_node("Identity", ["cond_j"], ["cond_j_out"]),
         helper.make_node("Cast", ["j"], ["fj"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["total", "fj"], ["total_out"])],
        ["total"], ["cond_j_out", "total_out"], iteration="j", condition="cond_j",
    )
    outer = _body(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Loop", ["i", "", "acc"], ["acc_out"], body=inner)],
        ["acc"], ["cond_out", "acc_out"],
    )
    then_graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["looped"], body=outer)], "then_branch", [], [_float("looped", [2])]
    )
    else_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["negated"])], "else_branch", [],
                                   [_float("negated", [2])])
    model = _model([helper.make_node("If", ["flag"], ["y"], then_branch=then_graph, else_branch=else_graph)],
                   [_float("x", [2]), _scalar("n", TensorProto.INT64), _scalar("flag", TensorProto.BOOL)],
                   [_float("y", [2])])
    x = np.array([1, -1], np.float32)
    for flag in (True, False):
        source = _check_round_trip(model, [x, np.array(5, np.int64), np.array(flag)], tmp_path)
    assert _loop_lines(source) == ["if flag:", "for i in range(n):", "for j in range(i):"]
    assert "op.Loop" not in source and "@graph" not in source
    # sum over i < 5 of sum over j < i of j = 0 + 0 + 1 + 3 + 6
    assert run(model, [x, np.array(5, np.int64), np.array(True)])[0].tolist() == [11, 9]


def test_loops_the_compiler_cannot_rebuild_keep_op_loop(tmp_path) -> None:
    # A scan output, and a condition output that is neither passed through nor Not(b).
    scan = _body(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Add", ["acc", "acc"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scanned"])],
        ["acc"], ["cond_out", "acc_out", "scanned"],
    )
    odd = _body(
        [helper.make_node("ReduceMin", ["acc"], ["low"], keepdims=0),
         helper.make_node("Less", ["low", "zero"], ["cond_out"]),
         helper.make_node("Neg", ["acc"], ["acc_out"])],
        ["acc"], ["cond_out", "acc_out"],
    )
    model = _model(
        [helper.make_node("Loop", ["n", "", "x"], ["y", "trace"], body=scan),
         _constant("zero", np.array(0, np.float32)), _constant("true", np.array(True)),
         helper.make_node("Loop", ["n", "true", "y"], ["z"], body=odd)],
        [_float("x", [2]), _scalar("n", TensorProto.INT64)],
        [_float("z", [2]), _float("trace", [None, 2])],
    )
    source = _check_round_trip(model, [np.array([1, -2], np.float32), np.array(3, np.int64)], tmp_path)
    assert source.count("op.Loop(") == 2 and "for " not in source and "while " not in source


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_compiled_loops_come_back_as_the_same_loops(data, tmp_path) -> None:
    # Random programs with for/while/if/break/continue: compiled, written back as Python and
    # compiled again, they must give the same model (loops as Python loops where the
    # compiler can rebuild them, op.Loop otherwise) computing the same outputs.
    body = data.draw(blocks(1, 0, None))
    model = define(body).to_model_proto()
    source, rebuilt = round_trip(model, str(tmp_path))
    difference = first_difference(model, rebuilt)
    assert difference is None, f"{difference}\n" + "\n".join(body) + f"\n{source}"
    if "Loop" in {n.op_type for n in model.graph.node} and "op.Loop(" not in source:
        assert " for " in source or " while " in source
    inputs = [np.array(1.5, np.float32), np.array(-0.5, np.float32), np.array(data.draw(st.integers(0, 4)), np.int64)]
    for expected, got in zip(run(model, inputs), run(rebuilt, inputs)):
        np.testing.assert_array_equal(expected, got)


@given(st.text(alphabet="ab_09/.-:é", max_size=8))
def test_identifier_fast_paths_turn_each_run_of_other_characters_into_one_underscore(name: str) -> None:
    # The oracle: the regex rule the fast paths (str.replace, bytes.translate) stand for.
    import re

    from converter.python_source.names import identifier as _identifier

    expected = name
    if not (name.isidentifier() and name.isascii()):
        expected = re.sub(r"[^0-9a-zA-Z_]+", "_", name).strip("_")
        expected = "v" if not expected else ("v" + expected if expected[0].isdigit() else expected)
    assert _identifier(name, "v") == expected
