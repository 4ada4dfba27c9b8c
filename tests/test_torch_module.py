"""``converter.to_torch``: the module, its training semantics and the weights going back.

Oracles: onnxruntime on the same proto (``eval()``, written-back weights), torch's own
``nn.BatchNorm2d`` (training mode), plain torch code (gradients through control flow).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from hypothesis import given
from hypothesis import strategies as st

import converter
from converter.torch_module.names import onnx_name, torch_name
from tests import torch_models
from tests.roundtrip import run

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch

RNG = np.random.default_rng(20261124)


def images(batch: int) -> np.ndarray:
    return RNG.standard_normal((batch, 3, 8, 8)).astype(np.float32)


def numpy_of(value: Any) -> np.ndarray:
    return value.detach().numpy()


def onnx_params(module: Any) -> set[str]:
    return {onnx_name(name) for name, _ in module.named_parameters()}


def onnx_buffers(module: Any) -> set[str]:
    return {onnx_name(name) for name, _ in module.named_buffers() if name in module.state_dict()}


# ----------------------------------------------------------------------------- names


@given(st.text(max_size=12))
def test_torch_names_are_legal_and_reversible(name: str) -> None:
    escaped = torch_name(name, frozenset({"training"}))
    assert "." not in escaped and escaped and escaped != "training" and not escaped.startswith("_")
    assert onnx_name(escaped) == name


def test_parameters_and_buffers_keep_the_onnx_names() -> None:
    module = converter.to_torch(torch_models.cnn())
    assert onnx_params(module) == {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight", "fc.bias"}
    assert onnx_buffers(module) == {"bn.running_mean", "bn.running_var"}
    assert "conv_weight = getattr(self, \"conv%2Eweight\")" in module.code


def test_frozen_markup_params_and_integer_tensors_are_buffers() -> None:
    weight = onnx.numpy_helper.from_array(np.ones((2, 2), np.float32), "dense$constant")
    counts = onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "counts")
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "dense$constant"], ["h"]), oh.make_node("Cast", ["counts"], ["c"], to=1),
         oh.make_node("Add", ["h", "c"], ["y"])],
        "g", [oh.make_tensor_value_info("x", 1, ["N", 2])], [oh.make_tensor_value_info("y", 1, ["N", 2])],
        [weight, counts])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    module = converter.to_torch(model)
    assert onnx_params(module) == set()
    assert onnx_buffers(module) == {"dense$constant", "counts"}
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_allclose(numpy_of(module(torch.from_numpy(x))), run(model, [x])[0], rtol=1e-6)


def test_weight_like_constants_are_parameters_and_go_back_as_constants() -> None:
    kernel = onnx.numpy_helper.from_array(RNG.standard_normal((2, 2)).astype(np.float32))
    graph = oh.make_graph(
        [oh.make_node("Constant", [], ["kernel"], value=kernel), oh.make_node("MatMul", ["x", "kernel"], ["y"])],
        "g", [oh.make_tensor_value_info("x", 1, ["N", 2])], [oh.make_tensor_value_info("y", 1, ["N", 2])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    module = converter.to_torch(model)
    assert onnx_params(module) == {"kernel"}
    with torch.no_grad():
        module.get_parameter("kernel").mul_(2.0)
    written = module.to_onnx()
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_allclose(run(written, [x])[0], 2.0 * run(model, [x])[0], rtol=1e-6)
    assert [node.op_type for node in written.graph.node] == ["Constant", "MatMul"]


# ---------------------------------------------------------------------- eval, batches


@pytest.mark.parametrize("batch", [1, 5])
def test_eval_reproduces_onnxruntime_at_any_batch(batch: int) -> None:
    model = torch_models.cnn()
    module = converter.to_torch(model).eval()
    x = images(batch)
    np.testing.assert_allclose(numpy_of(module(torch.from_numpy(x))), run(model, [x])[0], rtol=1e-5, atol=1e-6)


def test_a_fixed_declared_batch_is_not_baked_in() -> None:
    model = torch_models.cnn()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # declared [1, 3, 8, 8]
    module = converter.to_torch(model).eval()
    x = images(4)
    one_by_one = np.concatenate([run(model, [x[i: i + 1]])[0] for i in range(4)])
    np.testing.assert_allclose(numpy_of(module(torch.from_numpy(x))), one_by_one, rtol=1e-5, atol=1e-6)


def test_outputs_end_the_module_at_inner_values() -> None:
    model = torch_models.cnn()
    trunk = converter.to_torch(model, outputs=["pool_out"]).eval()
    x = images(2)
    expected = run(converter.cut(model, outputs=["pool_out"]), [x])[0]
    np.testing.assert_allclose(numpy_of(trunk(torch.from_numpy(x))), expected, rtol=1e-5, atol=1e-6)
    assert onnx_params(trunk) == {"conv.weight", "conv.bias", "bn.weight", "bn.bias"}


def test_an_unknown_output_name_is_a_dsl_error() -> None:
    from dsl.errors import DslError

    with pytest.raises(DslError, match="no value named 'nowhere'"):
        converter.to_torch(torch_models.cnn(), outputs=["nowhere"])


def test_ops_without_a_kernel_run_eagerly_and_detached() -> None:
    graph = oh.make_graph(
        [oh.make_node("Binarizer", ["x"], ["b"], domain="ai.onnx.ml", threshold=0.25),
         oh.make_node("Mul", ["b", "x"], ["y"])],
        "g", [oh.make_tensor_value_info("x", 1, ["N"])], [oh.make_tensor_value_info("y", 1, ["N"])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("ai.onnx.ml", 3)])
    module = converter.to_torch(model)
    assert "eager_Binarizer" in module.code
    x = torch.tensor([-1.0, 0.2, 0.5, 3.0], requires_grad=True)
    y = module(x)
    np.testing.assert_allclose(numpy_of(y), run(model, [x.detach().numpy()])[0])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, 1.0, 1.0])  # d(b * x)/dx with b held constant


# -------------------------------------------------------------------- training mode


def batch_norm_model(momentum: float, epsilon: float, channels: int) -> onnx.ModelProto:
    stats = [
        onnx.numpy_helper.from_array(RNG.standard_normal(channels).astype(np.float32) * 0.5 + 1, "scale"),
        onnx.numpy_helper.from_array(RNG.standard_normal(channels).astype(np.float32), "bias"),
        onnx.numpy_helper.from_array(RNG.standard_normal(channels).astype(np.float32), "mean"),
        onnx.numpy_helper.from_array(RNG.random(channels).astype(np.float32) + 0.5, "var"),
    ]
    node = oh.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], momentum=momentum,
                        epsilon=epsilon)
    graph = oh.make_graph([node], "bn", [oh.make_tensor_value_info("x", 1, ["N", channels, "H", "W"])],
                          [oh.make_tensor_value_info("y", 1, ["N", channels, "H", "W"])], stats)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 15)])


def test_batch_norm_trains_like_torch_batchnorm2d() -> None:
    model = batch_norm_model(momentum=0.7, epsilon=1e-3, channels=3)
    module = converter.to_torch(model).train()
    reference = torch.nn.BatchNorm2d(3, eps=1e-3, momentum=0.3)
    state = {onnx_name(k): v for k, v in module.state_dict().items()}
    with torch.no_grad():
        reference.weight.copy_(state["scale"])
        reference.bias.copy_(state["bias"])
        reference.running_mean.copy_(state["mean"])
        reference.running_var.copy_(state["var"])
    for step in range(3):
        x = torch.from_numpy(RNG.standard_normal((4, 3, 5, 5)).astype(np.float32) * (step + 1))
        torch.testing.assert_close(module(x), reference(x))
        state = {onnx_name(k): v for k, v in module.state_dict().items()}
        torch.testing.assert_close(state["mean"], reference.running_mean)
        torch.testing.assert_close(state["var"], reference.running_var)
    module.eval()
    reference.eval()
    x = torch.from_numpy(RNG.standard_normal((2, 3, 5, 5)).astype(np.float32))
    torch.testing.assert_close(module(x), reference(x))
    np.testing.assert_allclose(run(module.to_onnx(), [x.numpy()])[0], numpy_of(reference(x)), rtol=1e-5, atol=1e-5)


def dropout_model(ratio: float) -> onnx.ModelProto:
    graph = oh.make_graph([oh.make_node("Dropout", ["x"], ["y"], ratio=ratio)], "dropout",
                          [oh.make_tensor_value_info("x", 1, ["N"])], [oh.make_tensor_value_info("y", 1, ["N"])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 10)])


def test_dropout_drops_in_training_and_not_in_eval() -> None:
    module = converter.to_torch(dropout_model(0.25))
    x = torch.ones(4000)
    torch.manual_seed(0)
    dropped = module.train()(x)
    kept = dropped != 0
    assert 0.70 < float(kept.float().mean()) < 0.80
    torch.testing.assert_close(dropped[kept], torch.full((int(kept.sum()),), 1 / 0.75))
    torch.testing.assert_close(module.eval()(x), x)


# ------------------------------------------------------------------ weights going back


def train_step(module: Any, optimizer: Any, batch: int = 6) -> None:
    x = torch.from_numpy(images(batch))
    target = torch.from_numpy(RNG.integers(0, 3, batch))
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(module(x), target).backward()
    optimizer.step()


def test_trained_weights_go_back_under_their_names() -> None:
    model = torch_models.cnn()
    module = converter.to_torch(model).train()
    train_step(module, torch.optim.SGD(module.parameters(), lr=0.1))
    module.eval()
    written = module.to_onnx()
    converter.assert_isomorphic(written, converter.with_weights(model, module.state_dict()))
    x = images(3)
    np.testing.assert_allclose(run(written, [x])[0], numpy_of(module(torch.from_numpy(x))), rtol=1e-5, atol=1e-5)
    before = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    after = {t.name: onnx.numpy_helper.to_array(t) for t in written.graph.initializer}
    assert before.keys() == after.keys()
    changed = {name for name in before if not np.array_equal(before[name], after[name])}
    assert changed == {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                       "fc.weight", "fc.bias"}
    unchanged = converter.to_torch(model).to_onnx()
    converter.assert_isomorphic(model, unchanged)


def test_with_weights_names_what_does_not_fit() -> None:
    from dsl.errors import DslError

    with pytest.raises(DslError, match="no weight named 'missing'"):
        converter.with_weights(torch_models.cnn(), {"missing": torch.zeros(1)})
    with pytest.raises(DslError, match="shape"):
        converter.with_weights(torch_models.cnn(), {"fc%2Ebias": torch.zeros(7)})


def test_with_weights_names_close_matches_and_tied_copies() -> None:
    from dsl.errors import DslError

    module = converter.to_torch(torch_models.cnn())
    misspelt = {**module.state_dict(), "fc%2Eweigth": torch.zeros(3, 64)}
    with pytest.raises(DslError, match=r"did you mean 'fc%2Eweight'"):
        converter.with_weights(torch_models.cnn(), misspelt)
    # a language model's output layer tied to its embedding: one tensor under two keys
    tied = {**module.state_dict(), "lm_head.weight": module.state_dict()["fc%2Eweight"]}
    with pytest.raises(DslError, match=r"same tensor as 'fc\.weight': a tied copy"):
        converter.with_weights(torch_models.cnn(), tied)


def _branch_weight_model() -> onnx.ModelProto:
    """``y = (x @ W) * 0.5`` with ``W`` a float Constant held in each branch of an If (as
    spox writes weights); the scalar is a constant, not a weight."""
    rng = np.random.default_rng(3)

    def branch(name: str, scale: float) -> onnx.GraphProto:
        weight = onnx.numpy_helper.from_array((scale * rng.standard_normal((3, 2))).astype(np.float32))
        return oh.make_graph(
            [oh.make_node("Constant", [], [f"{name}_w"], value=weight),
             oh.make_node("MatMul", ["x", f"{name}_w"], [f"{name}_y"])],
            name, [], [oh.make_tensor_value_info(f"{name}_y", onnx.TensorProto.FLOAT, ["N", 2])])

    graph = oh.make_graph(
        [oh.make_node("If", ["flag"], ["chosen"], then_branch=branch("then", 1.0), else_branch=branch("else", -1.0)),
         oh.make_node("Constant", [], ["half"], value=onnx.numpy_helper.from_array(np.array(0.5, np.float32))),
         oh.make_node("Mul", ["chosen", "half"], ["y"])],
        "branches",
        [oh.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 2])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_weight_constants_in_branches_train_like_the_main_graphs() -> None:
    model = _branch_weight_model()
    module = converter.to_torch(model).train()
    assert onnx_params(module) == {"then_w", "else_w"}
    assert set(module.state_dict()) == {"then_w", "else_w"}  # the model's other constants are not saved
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    module(torch.tensor(True), torch.from_numpy(x)).square().sum().backward()
    optimizer.step()
    written = module.to_onnx()
    for flag in (True, False):
        want = numpy_of(module(torch.tensor(flag), torch.from_numpy(x)))
        np.testing.assert_allclose(run(written, [np.array(flag), x])[0], want, rtol=1e-5, atol=1e-6)
    converter.assert_isomorphic(written, converter.with_weights(model, module.state_dict()))
    # the then branch's weight trained, the else branch's (no gradient) did not
    assert not np.array_equal(run(written, [np.array(True), x])[0], run(model, [np.array(True), x])[0])
    np.testing.assert_array_equal(run(written, [np.array(False), x])[0], run(model, [np.array(False), x])[0])


def test_a_checkpoint_loads_into_a_fresh_conversion() -> None:
    model = torch_models.cnn()
    first = converter.to_torch(model).train()
    optimizer = torch.optim.Adam(first.parameters(), lr=1e-2)
    train_step(first, optimizer)
    stream = io.BytesIO()
    torch.save({"model": first.state_dict(), "optimizer": optimizer.state_dict()}, stream)
    stream.seek(0)
    checkpoint = torch.load(stream, weights_only=True)
    second = converter.to_torch(model).train()
    second.load_state_dict(checkpoint["model"])
    resumed = torch.optim.Adam(second.parameters(), lr=1e-2)
    resumed.load_state_dict(checkpoint["optimizer"])
    seed = RNG.integers(1 << 30)
    for module, opt in ((first, optimizer), (second, resumed)):
        torch.manual_seed(seed)
        local = np.random.default_rng(seed)
        x = torch.from_numpy(local.standard_normal((6, 3, 8, 8)).astype(np.float32))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(module(x), torch.from_numpy(local.integers(0, 3, 6))).backward()
        opt.step()
    for (name, one), (other, two) in zip(first.state_dict().items(), second.state_dict().items()):
        assert name == other
        torch.testing.assert_close(one, two)


# ------------------------------------------------------------------------ control flow


def test_if_loop_and_scan_reproduce_onnxruntime_and_pass_gradients() -> None:
    model = torch_models.control_flow()
    module = converter.to_torch(model).eval()
    for sign in (1.0, -1.0):
        x = (np.abs(RNG.standard_normal((3, 4))) * sign).astype(np.float32)
        for got, expected in zip(module(torch.from_numpy(x)), run(model, [x])):
            np.testing.assert_allclose(numpy_of(got), expected, rtol=1e-5, atol=1e-6)
    x = torch.from_numpy(np.abs(RNG.standard_normal((3, 4))).astype(np.float32))
    y, z, _, _ = module(x)
    (y.sum() + z.sum()).backward()
    w = torch.from_numpy(onnx.numpy_helper.to_array(model.graph.initializer[0]).copy()).requires_grad_()
    plain_z = x
    for _ in range(3):
        plain_z = plain_z * w + 1
    ((x * w).sum() + plain_z.sum()).backward()
    torch.testing.assert_close(module.get_parameter("w").grad, w.grad)


# --------------------------------------------------------------------- torch ecosystem


def cnn_module() -> tuple[Any, torch.Tensor, torch.Tensor]:
    module = converter.to_torch(torch_models.cnn()).eval()
    x = torch.from_numpy(images(2))
    with torch.no_grad():
        return module, x, module(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile(backend: str) -> None:
    module, x, expected = cnn_module()
    compiled = torch.compile(module, backend=backend)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), expected)


def test_torch_export() -> None:
    module, x, expected = cnn_module()
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(module, (x,), dynamic_shapes={"x": {0: batch}})
    torch.testing.assert_close(exported.module()(x), expected)
    x5 = torch.from_numpy(images(5))
    torch.testing.assert_close(exported.module()(x5), module(x5))


def test_torch_jit_trace() -> None:
    module, x, expected = cnn_module()
    traced = torch.jit.trace(module, (x,))
    torch.testing.assert_close(traced(x), expected)


def test_deepcopy_keeps_to_onnx() -> None:
    import copy

    module, x, expected = cnn_module()
    twin = copy.deepcopy(module)
    torch.testing.assert_close(twin(x), expected)
    converter.assert_isomorphic(twin.to_onnx(), module.to_onnx())


def test_importing_the_back_end_keeps_the_facade_function() -> None:
    import converter.torch_module

    assert converter.torch_module.build_module is not None
    assert callable(converter.to_torch) and converter.to_torch.__module__ == "converter"


def test_batch_norm_statistics_tied_to_a_weight_still_train() -> None:
    """Exporters deduplicate equal initializers: a fresh BatchNorm's running variance may be
    ``Identity(weight)``; training then uses batch statistics and updates nothing."""
    ones = onnx.numpy_helper.from_array(np.ones(2, np.float32), "scale")
    zeros = onnx.numpy_helper.from_array(np.zeros(2, np.float32), "bias")
    graph = oh.make_graph(
        [oh.make_node("Identity", ["scale"], ["var"]), oh.make_node("Identity", ["bias"], ["mean"]),
         oh.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"])],
        "g", [oh.make_tensor_value_info("x", 1, ["N", 2, 3])], [oh.make_tensor_value_info("y", 1, ["N", 2, 3])],
        [ones, zeros])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 15)])
    module = converter.to_torch(model)
    x = torch.from_numpy(RNG.standard_normal((4, 2, 3)).astype(np.float32))
    torch.testing.assert_close(module.train()(x), torch.nn.functional.batch_norm(x, None, None, training=True))
    module.eval()(x).sum().backward()
    np.testing.assert_allclose(numpy_of(module(x)), run(model, [x.numpy()])[0], rtol=1e-5, atol=1e-5)


def test_to_torch_names_what_it_takes() -> None:
    from dsl.errors import DslError

    with pytest.raises(DslError, match=r"a path, a ModelProto or an ir\.Model, not int"):
        converter.to_torch(3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_module_runs_on_cuda_eager_fallbacks_included() -> None:
    graph = oh.make_graph(
        [oh.make_node("Binarizer", ["x"], ["b"], domain="ai.onnx.ml", threshold=0.25),
         oh.make_node("Mul", ["b", "x"], ["y"])],
        "g", [oh.make_tensor_value_info("x", 1, ["N"])], [oh.make_tensor_value_info("y", 1, ["N"])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("ai.onnx.ml", 3)])
    x = np.array([-1.0, 0.2, 0.5, 3.0], np.float32)
    module = converter.to_torch(model).cuda()
    result = module(torch.from_numpy(x).cuda())
    assert result.device.type == "cuda"
    np.testing.assert_allclose(result.cpu().numpy(), run(model, [x])[0])
    cnn = converter.to_torch(torch_models.cnn()).cuda().eval()
    batch = images(2)
    np.testing.assert_allclose(cnn(torch.from_numpy(batch).cuda()).detach().cpu().numpy(),
                               run(torch_models.cnn(), [batch])[0], rtol=1e-4, atol=1e-4)
