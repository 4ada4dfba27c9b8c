"""converter.split and converter.join (dsl.passes.merge.split_models / join_models).

The oracle runs the parts separately in onnxruntime and chains the arrays; the composed
model (checked with ``onnx.checker`` full_check) must give the same arrays, its inputs
and outputs in the documented order.
"""

from __future__ import annotations

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
from dsl.errors import DslError, DslNameError, DslTypeError
from dsl.passes.merge import join_models, split_models

F = TensorProto.FLOAT


def make(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: Sequence[Any] = (),
         opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def vi(name: str, elem: int = F) -> Any:
    return helper.make_tensor_value_info(name, elem, [2, 3])


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(None, feeds)))


def checked(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx.checker.check_model(model, full_check=True)
    return model


def parent() -> onnx.ModelProto:
    """x -> h = Relu(x), s = x + 1 (two outputs)."""
    one = helper.make_tensor("one", F, [], [1.0])
    return make([helper.make_node("Relu", ["x"], ["h"], name="n0"), helper.make_node("Add", ["x", "one"], ["s"], name="n1")],
                [vi("x")], [vi("h"), vi("s")], [one])


def child(op: str, output: str = "y") -> onnx.ModelProto:
    """x, z -> y = op(x, z); names clash with the parent's on purpose (x, n0)."""
    return make([helper.make_node(op, ["x", "z"], [output], name="n0")], [vi("x"), vi("z")], [vi(output)])


def arrays(*names: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(len(names))
    return {name: rng.standard_normal((2, 3)).astype(np.float32) for name in names}


def test_split_feeds_one_output_to_both_children() -> None:
    p, left, right = parent(), child("Mul"), child("Sub")
    model = checked(converter.split(p, left, right, [("h", "x")], [("h", "x"), ("s", "z")]))
    feeds = arrays("x", "lz")
    parts = run(p, {"x": feeds["x"]})
    want_left = run(left, {"x": parts["h"], "z": feeds["lz"]})["y"]
    want_right = run(right, {"x": parts["h"], "z": parts["s"]})["y"]
    inputs = [i.name for i in model.graph.input]
    assert inputs[0] == "x" and len(inputs) == 2  # the parent's x, then the left's open z
    got = list(run(model, {inputs[0]: feeds["x"], inputs[1]: feeds["lz"]}).values())
    assert len(got) == 2  # h and s are consumed; left's y, then right's y
    np.testing.assert_allclose(got[0], want_left, rtol=1e-6)
    np.testing.assert_allclose(got[1], want_right, rtol=1e-6)


def test_split_keeps_parent_outputs_no_map_consumes(tmp_path: Path) -> None:
    p, left, right = parent(), child("Mul"), child("Add")
    paths = []
    for index, model in enumerate((p, left, right)):
        paths.append(tmp_path / f"m{index}.onnx")
        onnx.save(model, paths[-1])
    model = checked(converter.split(*paths, [("h", "x"), ("h", "z")], [("h", "x"), ("h", "z")]))
    x = arrays("x")["x"]
    got = list(run(model, {"x": x}).values())
    h = np.maximum(x, 0)
    assert model.graph.output[0].name == "s"
    np.testing.assert_allclose(got[0], x + 1, rtol=1e-6)
    np.testing.assert_allclose(got[1], h * h, rtol=1e-6)
    np.testing.assert_allclose(got[2], h + h, rtol=1e-6)


def test_join_feeds_two_parents_into_one_child() -> None:
    first, second, fused = parent(), parent(), child("Sub")
    model = checked(converter.join(first, second, fused, [("h", "x")], [("s", "z")]))
    feeds = arrays("a", "b")
    want_first, want_second = run(first, {"x": feeds["a"]}), run(second, {"x": feeds["b"]})
    want = run(fused, {"x": want_first["h"], "z": want_second["s"]})["y"]
    inputs = [i.name for i in model.graph.input]
    assert len(inputs) == 2 and inputs[0] == "x"  # the left's x, then the right's (renamed)
    got = list(run(model, {inputs[0]: feeds["a"], inputs[1]: feeds["b"]}).values())
    # outputs: the left's s, the right's h (no map consumes them), then the child's y
    assert len(got) == 3
    np.testing.assert_allclose(got[0], want_first["s"], rtol=1e-6)
    np.testing.assert_allclose(got[1], want_second["h"], rtol=1e-6)
    np.testing.assert_allclose(got[2], want, rtol=1e-6)


def test_join_aligns_opsets() -> None:
    old = make([helper.make_node("Relu", ["x"], ["h"])], [vi("x")], [vi("h")], opset=13)
    model = checked(converter.join(old, parent(), child("Add"), [("h", "x")], [("h", "z")]))
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == 18
    inputs = [i.name for i in model.graph.input]
    feeds = arrays("a", "b")
    got = list(run(model, {inputs[0]: feeds["a"], inputs[1]: feeds["b"]}).values())
    np.testing.assert_allclose(got[-1], np.maximum(feeds["a"], 0) + np.maximum(feeds["b"], 0), rtol=1e-6)


def test_unknown_names_and_types_are_refused() -> None:
    with pytest.raises(DslNameError, match=r"(?s)'hh'.*did you mean 'h'"):
        converter.split(parent(), child("Mul"), child("Sub"), [("h", "x")], [("hh", "x")])
    with pytest.raises(DslNameError, match="'q'"):
        converter.join(parent(), parent(), child("Sub"), [("h", "q")], [("s", "z")])
    int_child = make([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.INT64)], [vi("y", TensorProto.INT64)])
    with pytest.raises(DslTypeError, match=r"(?s)'h'.*'x'.*element types"):
        converter.split(parent(), child("Mul"), int_child, [("h", "x")], [("h", "x")])


def test_a_child_input_fed_by_both_parents_is_refused() -> None:
    with pytest.raises(DslNameError, match="'x' twice"):
        converter.join(parent(), parent(), child("Sub"), [("h", "x")], [("s", "x")])


def test_the_passes_refuse_a_model_used_twice() -> None:
    p, c = model_from_proto(parent()), model_from_proto(child("Mul"))
    with pytest.raises(DslError, match="same model"):
        split_models(p, c, c, [("h", "x")], [("h", "x")])
    with pytest.raises(DslError, match="same model"):
        join_models(p, p, c, [("h", "x")], [("s", "z")])


def test_a_non_model_is_refused() -> None:
    with pytest.raises(DslError, match="not int"):
        converter.split(parent(), 3, child("Sub"), [], [])


def test_each_model_composed_warns_of_its_own_negative_sizes() -> None:
    # The readers of one composition share the types they read; a type declaring a negative
    # size (read as unknown) still warns once for each model that declares it, naming it.
    import warnings

    from dsl.errors import ModelWarning

    def unbatched(op: str) -> onnx.ModelProto:
        batch = helper.make_tensor_value_info("x", F, [-1, 3]), helper.make_tensor_value_info("y", F, [-1, 3])
        return make([helper.make_node(op, ["x"], ["y"])], [batch[0]], [batch[1]])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = checked(converter.split(unbatched("Relu"), unbatched("Neg"), unbatched("Abs"), [("y", "x")],
                                        [("y", "x")]))
    warned = [str(w.message).split(":")[0] for w in caught if issubclass(w.category, ModelWarning)]
    assert warned == ["<parent model>", "<left model>", "<right model>"]
    x = arrays("x")["x"]
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    results = list(run(model, {"x": x}).values())
    np.testing.assert_allclose(results[0], -np.maximum(x, 0))
    np.testing.assert_allclose(results[1], np.maximum(x, 0))
