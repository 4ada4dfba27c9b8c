"""Calls of model-local functions through ``converter.to_torch``: built in torch, differentiable.

Material: every ONNX backend node case whose op ONNX defines by a function (plain or
context-dependent), rewritten so the node calls that very function body as a
model-local function of a custom domain, its schema defaults as the function's
attribute defaults; the case's own attributes reach the body through ``ref_attr``.
Oracles: onnxruntime on the rewritten model (and the case's expected outputs), and
gradients of the same model with its calls inlined by the inline pass.  Besides: nested
calls, a body holding an If and a Loop, an omitted optional input, recursion refused,
and a ``@script`` model calling a scripted function, trained and written back.  No call
falls back to the eager back end (only an op of a body torch has no kernel for does):
the one call that cannot be built, a recursive one (ONNX forbids it), is a DslError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.helper as oh
import pytest

import converter
from dsl import FLOAT, initializer, ir, script
from dsl import opset18 as op
from tests.roundtrip import output_oracle, run
from tests.test_backend_node_eager import _is_tensor_io, all_cases
from tests.test_torch_module_nodes import RANDOM, _agrees, _arrays, _close, _module_outputs

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch

DOMAIN = "local.functions"


def as_local_function(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The one-node ``model`` with its node calling the op's ONNX function body as a
    model-local function (None when the op has no function at the model's version)."""
    if len(model.graph.node) != 1 or model.functions:
        return None
    node = model.graph.node[0]
    version = next((o.version for o in model.opset_import if o.domain == node.domain), None)
    try:
        schema = onnx.defs.get_schema(node.op_type, version or 1, node.domain)
    except onnx.defs.SchemaError:
        return None
    body = onnx.FunctionProto()
    plain = [v for v in schema.function_opset_versions if version is not None and v <= version]
    context = [v for v in schema.context_dependent_function_opset_versions if version is not None and v <= version]
    if plain:
        body.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    elif context:
        input_types = [value.type.SerializeToString() for value in model.graph.input]
        body.ParseFromString(schema.get_context_dependent_function_with_opset_version(
            max(context), node.SerializeToString(), input_types))
    if not body.node:
        return None
    body.domain, body.name = DOMAIN, node.op_type
    del body.attribute[:]
    for name, attr in schema.attributes.items():
        if attr.default_value.type != onnx.AttributeProto.UNDEFINED:
            default = body.attribute_proto.add()
            default.CopyFrom(attr.default_value)
            default.name = name
        else:
            body.attribute.append(name)
    if not any(opset.domain == node.domain for opset in body.opset_import):
        body.opset_import.append(oh.make_opsetid(node.domain, version or 1))
    model_versions = {opset.domain: opset.version for opset in model.opset_import}
    imported = {opset.domain for opset in body.opset_import}
    for domain in sorted({inner.domain for inner in body.node} - imported):  # (ai.onnx.preview bodies use ai.onnx)
        body.opset_import.append(oh.make_opsetid(domain, model_versions.get(domain, onnx.defs.onnx_opset_version())))
    # A context-dependent body built for a node that omits optional outputs lists them
    # without computing them: they leave the function's outputs (trailing ones only).
    computed = {name for inner in body.node for name in inner.output} | set(body.input)
    kept = [name for name in body.output if name in computed]
    if kept != list(body.output)[: len(kept)] or len(node.output) > len(kept):
        return None
    del body.output[len(kept):]
    wrapped = onnx.ModelProto()
    wrapped.CopyFrom(model)
    wrapped.graph.node[0].domain = DOMAIN
    wrapped.opset_import.append(oh.make_opsetid(DOMAIN, 1))
    wrapped.functions.append(body)
    wrapped.ir_version = max(wrapped.ir_version, 9)  # (attribute defaults in a FunctionProto)
    return wrapped


def _cases() -> list[Any]:
    found = []
    for case in all_cases():
        if case.name in RANDOM or not _is_tensor_io(case.model):
            continue
        wrapped = as_local_function(case.model)
        if wrapped is not None:
            found.append(pytest.param(case, wrapped, id=case.name))
    return found


CASES = _cases()


def eager_labels(module: Any) -> list[str]:
    from converter.torch_module.eager_node import EagerNode

    return [sub.label for sub in module.modules() if isinstance(sub, EagerNode)]


def test_the_material_holds_plain_context_dependent_and_control_flow_functions() -> None:
    names = {param.values[0].name for param in CASES}
    assert len(names) > 300
    assert {"test_elu", "test_layer_normalization_2d_axis0", "test_range_float_type_positive_delta"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("case, wrapped", CASES)
def test_a_function_call_case_through_the_module(case: Any, wrapped: onnx.ModelProto) -> None:
    if not _arrays(case):
        pytest.skip("the case has no data set")
    oracles, reason = output_oracle(wrapped, _arrays(case), case.rtol, case.atol)
    if oracles is None and "No corresponding Numpy type" in reason:
        oracles = [expected for _, expected in _arrays(case)]  # (as the node cases: the spec's outputs)
    if oracles is None:
        pytest.skip(reason)
    module = converter.to_torch(wrapped).eval()
    # The call is built in torch: an eager fallback, if any, is one op of the body.
    assert all(f"{DOMAIN}::" not in label for label in eager_labels(module))
    for (inputs, expected), from_onnxruntime in zip(_arrays(case), oracles):
        got = _module_outputs(module, inputs)
        if from_onnxruntime is not expected and not _agrees(expected, got, case.rtol, case.atol):
            expected = from_onnxruntime
        _close(expected, got, case.rtol, case.atol)
    converter.assert_isomorphic(wrapped, module.to_onnx())


def inlined(model: onnx.ModelProto) -> ir.Model:
    from dsl.passes.inline import InlinePass

    flat = InlinePass()(converter.from_proto(model)).target
    assert not flat.functions
    return flat


def float_inputs(case: Any) -> list[int]:
    """The float32/float64 inputs of the case (none when any input has a type torch lacks)."""
    inputs = [np.asarray(value) for value in _arrays(case)[0][0]] if _arrays(case) else []
    if any(value.dtype.kind not in "biuf" or type(value.dtype).__module__ != "numpy.dtypes" for value in inputs):
        return []
    return [i for i, value in enumerate(inputs) if value.dtype in (np.float32, np.float64)]


GRADIENT_CASES = [param for param in CASES if float_inputs(param.values[0])]


@pytest.mark.slow
@pytest.mark.parametrize("case, wrapped", GRADIENT_CASES)
def test_gradients_through_a_call_equal_those_of_the_inlined_model(case: Any, wrapped: onnx.ModelProto) -> None:
    from tests.test_torch_module_nodes import _to_torch

    if output_oracle(wrapped, _arrays(case), case.rtol, case.atol)[0] is None:
        pytest.skip("onnxruntime cannot run the rewritten case (see its forward test)")
    called = converter.to_torch(wrapped).eval()
    flat = converter.to_torch(inlined(wrapped)).eval()
    inputs = _arrays(case)[0][0]
    differentiable = float_inputs(case)
    grads = []
    for module in (flat, called):  # (the inlined model decides which outputs carry gradients)
        feeds = [_to_torch(value) for value in inputs]
        for index in differentiable:
            feeds[index].requires_grad_()
        results = module(*feeds)
        results = results if isinstance(results, tuple) else (results,)
        if module is flat:
            carrying = [i for i, result in enumerate(results) if isinstance(result, torch.Tensor)
                        and result.dtype.is_floating_point and result.requires_grad]
            if not carrying:
                pytest.skip("no output depends differentiably on a float input")
        generator = torch.Generator().manual_seed(0)
        loss = sum((results[i] * torch.rand(results[i].shape, generator=generator, dtype=results[i].dtype)).sum()
                   for i in carrying)
        assert isinstance(loss, torch.Tensor) and loss.requires_grad
        grads.append(torch.autograd.grad(loss, [feeds[i] for i in differentiable], allow_unused=True))
    for one, two in zip(*grads):
        assert (one is None) == (two is None)
        if one is not None:
            torch.testing.assert_close(one, two, equal_nan=True)


# ------------------------------------------------------------ functions written by hand


def nested_model(elem_type: int = onnx.TensorProto.FLOAT) -> onnx.ModelProto:
    """``main`` calls ``my.nn::block`` twice (its own weights, its own ``gain``); ``block``
    calls ``my.nn::dense`` with ``alpha`` forwarded from ``gain`` (a reference to a
    reference), then an If on the sign of the sum and a Loop of ``steps`` iterations whose
    count is a Constant of the attribute; ``dense``'s bias is optional."""
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    scale = oh.make_node("Constant", [], ["a"])
    scale.attribute.append(_ref("value_float", "alpha", onnx.AttributeProto.FLOAT))
    dense = oh.make_function(
        "my.nn", "dense", ["x", "w", "b"], ["y"],
        [oh.make_node("MatMul", ["x", "w"], ["xw"]), oh.make_node("Add", ["xw", "b"], ["h"]), scale,
         oh.make_node("CastLike", ["a", "h"], ["a_cast"]), oh.make_node("Mul", ["h", "a_cast"], ["y"])],
        [oh.make_opsetid("", 17)], attributes=[],
    )
    dense.attribute_proto.append(oh.make_attribute("alpha", 1.0))
    call_dense = oh.make_node("dense", ["x", "w", "b"], ["d"], domain="my.nn")
    call_dense.attribute.append(_ref("alpha", "gain", onnx.AttributeProto.FLOAT))
    untyped = onnx.TypeProto()
    then_branch = oh.make_graph([oh.make_node("Tanh", ["d"], ["t"])], "then", [], [oh.make_value_info("t", untyped)])
    else_branch = oh.make_graph([oh.make_node("Neg", ["d"], ["n"])], "else", [], [oh.make_value_info("n", untyped)])
    loop_body = oh.make_graph(
        [oh.make_node("Identity", ["cond"], ["cond_out"]), oh.make_node("Sin", ["acc"], ["s"]),
         oh.make_node("Add", ["s", "picked"], ["acc_out"])],
        "loop_body",
        [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []), oh.make_value_info("acc", untyped)],
        [oh.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []), oh.make_value_info("acc_out", untyped)],
    )
    steps = oh.make_node("Constant", [], ["steps"])
    steps.attribute.append(_ref("value_int", "steps", onnx.AttributeProto.INT))
    block = oh.make_function(
        "my.nn", "block", ["x", "w", "b"], ["out"],
        [call_dense, oh.make_node("ReduceSum", ["d"], ["total"], keepdims=0),
         oh.make_node("Constant", [], ["zero"], value_float=0.0), oh.make_node("CastLike", ["zero", "total"], ["z"]),
         oh.make_node("Greater", ["total", "z"], ["positive"]),
         oh.make_node("If", ["positive"], ["picked"], then_branch=then_branch, else_branch=else_branch),
         steps, oh.make_node("Loop", ["steps", "", "x"], ["out"], body=loop_body)],
        [oh.make_opsetid("", 17), oh.make_opsetid("my.nn", 1)], attributes=["gain"],
    )
    block.attribute_proto.append(oh.make_attribute("steps", 2))
    rng = np.random.default_rng(5)
    weights = [onnx.numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(dtype), name)
               for name, shape in (("w1", (4, 4)), ("b1", (4,)), ("w2", (4, 4)), ("b2", (4,)))]
    first = oh.make_node("block", ["x", "w1", "b1"], ["h"], domain="my.nn", gain=0.5)
    second = oh.make_node("block", ["h", "w2", "b2"], ["y"], domain="my.nn", gain=-2.0, steps=3)
    graph = oh.make_graph([first, second], "main", [oh.make_tensor_value_info("x", elem_type, ["N", 4])],
                          [oh.make_tensor_value_info("y", elem_type, ["N", 4])], weights)
    return oh.make_model(graph, functions=[dense, block], ir_version=10,
                         opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("my.nn", 1)])


def _ref(name: str, ref: str, kind: int) -> onnx.AttributeProto:
    attribute = onnx.AttributeProto()
    attribute.name, attribute.ref_attr_name, attribute.type = name, ref, kind
    return attribute


def test_nested_calls_with_control_flow_reproduce_onnxruntime_and_go_back_whole() -> None:
    model = nested_model()
    module = converter.to_torch(model).eval()
    assert not eager_labels(module)
    rng = np.random.default_rng(1)
    for scale in (1.0, -3.0, 0.1):  # (both branches of each If)
        x = (rng.standard_normal((3, 4)) * scale).astype(np.float32)
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), run(model, [x])[0],
                                   rtol=1e-5, atol=1e-6)
    converter.assert_isomorphic(model, module.to_onnx())
    assert [f.name for f in module.to_onnx().functions] == ["dense", "block"]
    assert {name for name, _ in module.named_parameters()} == {"w1", "b1", "w2", "b2"}


def test_gradients_through_nested_calls_equal_the_inlined_model_and_gradcheck() -> None:
    model = nested_model(onnx.TensorProto.DOUBLE)
    called = converter.to_torch(model)
    flat = converter.to_torch(inlined(model))
    x = torch.from_numpy(np.random.default_rng(2).standard_normal((3, 4)))
    grads = []
    for module in (called, flat):
        feed = x.clone().requires_grad_()
        module(feed).square().sum().backward()
        grads.append([feed.grad, *(module.get_parameter(name).grad for name in ("w1", "b1", "w2", "b2"))])
    for one, two in zip(*grads):
        assert one is not None and float(one.abs().sum()) > 0
        torch.testing.assert_close(one, two)
    assert torch.autograd.gradcheck(called, (x.clone().requires_grad_(),))


def test_an_omitted_optional_input_of_a_call_reaches_the_body_as_omitted() -> None:
    clip = oh.make_function("my.nn", "clip", ["x", "low", "high"], ["y"],
                            [oh.make_node("Clip", ["x", "low", "high"], ["y"])], [oh.make_opsetid("", 17)])
    graph = oh.make_graph([oh.make_node("clip", ["x", "low"], ["y"], domain="my.nn")], "main",
                          [oh.make_tensor_value_info("x", 1, ["N"])], [oh.make_tensor_value_info("y", 1, ["N"])],
                          [onnx.numpy_helper.from_array(np.array(-0.5, np.float32), "low")])
    model = oh.make_model(graph, functions=[clip], opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("my.nn", 1)])
    module = converter.to_torch(model)
    x = np.array([-2.0, -0.2, 0.7, 5.0], np.float32)
    np.testing.assert_array_equal(module(torch.from_numpy(x)).detach().numpy(), run(model, [x])[0])


def test_a_recursive_function_is_a_dsl_error() -> None:
    from dsl.errors import DslError

    model = nested_model()
    dense = model.functions[0]
    dense.node.append(oh.make_node("block", ["x", "w", "b"], ["again"], domain="my.nn"))
    with pytest.raises(DslError, match="calls itself"):
        converter.to_torch(model)


def _string_model(nodes: list[onnx.NodeProto], functions: list[onnx.FunctionProto]) -> onnx.ModelProto:
    strings = onnx.TensorProto.STRING
    graph = oh.make_graph(nodes, "main", [oh.make_tensor_value_info("x", strings, [4])],
                          [oh.make_tensor_value_info("y", strings, [4])])
    return oh.make_model(graph, functions=functions,
                         opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("my.text", 1)])


@pytest.mark.parametrize("through", ["a function's untyped body", "untyped values of the main graph"])
def test_strings_reach_no_torch_kernel_where_their_type_is_not_recorded(through: str) -> None:
    """A body's values (and a graph's intermediate values) often carry no type: a kernel fed
    strings there would fail inside torch.  Readers of a string-typed value, and of an eager
    node's untyped outputs when it read strings, run eagerly, through calls too."""
    swap = [oh.make_node("Split", ["s"], ["first", "second"], axis=0, num_outputs=2),
            oh.make_node("Concat", ["second", "first"], ["y"], axis=0)]
    if through == "a function's untyped body":
        function = oh.make_function("my.text", "swap_halves", ["s"], ["y"], swap, [oh.make_opsetid("", 18)])
        model = _string_model([oh.make_node("swap_halves", ["x"], ["y"], domain="my.text")], [function])
    else:
        model = _string_model([oh.make_node("Identity", ["x"], ["s"]), *swap], [])
    onnx.checker.check_model(model, full_check=True)
    x = np.array(["a", "b", "c", "d"], dtype=object)
    module = converter.to_torch(model)
    np.testing.assert_array_equal(module(x), run(model, [x])[0])
    np.testing.assert_array_equal(module(x), np.array(["c", "d", "a", "b"], dtype=object))


def test_shape_arithmetic_crosses_calls_and_stays_per_call() -> None:
    """A body reshaping by its input's runtime shape, called on two inputs of other ranks,
    and fed a shape the caller computed: each call reads its own sizes."""
    body = [oh.make_node("Shape", ["x"], ["shape"]), oh.make_node("Shape", ["like"], ["target"]),
            oh.make_node("Reshape", ["x", "target"], ["reshaped"]), oh.make_node("Gather", ["shape", "zero"], ["n"]),
            oh.make_node("Unsqueeze", ["n", "axes"], ["n1"]), oh.make_node("Concat", ["n1", "minus"], ["flat"], axis=0),
            oh.make_node("Reshape", ["reshaped", "flat"], ["y"])]
    consts = [oh.make_node("Constant", [], ["zero"], value_int=0), oh.make_node("Constant", [], ["axes"], value_ints=[0]),
              oh.make_node("Constant", [], ["minus"], value_ints=[-1])]
    flatten = oh.make_function("my.nn", "flatten_like", ["x", "like"], ["y"], consts + body, [oh.make_opsetid("", 18)])
    graph = oh.make_graph(
        [oh.make_node("flatten_like", ["a", "a"], ["ya"], domain="my.nn"),
         oh.make_node("flatten_like", ["b", "b"], ["yb"], domain="my.nn"),
         oh.make_node("Shape", ["b"], ["b_shape"]), oh.make_node("Reshape", ["a", "b_shape"], ["ab"]),
         oh.make_node("flatten_like", ["ab", "b"], ["yab"], domain="my.nn")],
        "main", [oh.make_tensor_value_info("a", 1, ["N", 3, 4]), oh.make_tensor_value_info("b", 1, ["N", 12])],
        [oh.make_tensor_value_info(name, 1, ["N", 12]) for name in ("ya", "yb", "yab")])
    model = oh.make_model(graph, functions=[flatten],
                          opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("my.nn", 1)])
    onnx.checker.check_model(model, full_check=True)
    a = np.arange(2 * 12, dtype=np.float32).reshape(2, 3, 4)
    b = -np.arange(2 * 12, dtype=np.float32).reshape(2, 12)
    module = converter.to_torch(model)
    for found, expected in zip(module(torch.from_numpy(a), torch.from_numpy(b)), run(model, [a, b])):
        np.testing.assert_array_equal(found.numpy(), expected)


# ------------------------------------------------------- a scripted model, trained in torch

_RNG = np.random.default_rng(3)
HIDDEN_W = initializer((_RNG.standard_normal((4, 8)) * 0.5).astype(np.float32), name="hidden.weight")
HIDDEN_B = initializer(np.zeros(8, np.float32), name="hidden.bias")
OUT_W = initializer((_RNG.standard_normal((8, 1)) * 0.5).astype(np.float32), name="out.weight")


@script()
def dense_tanh(x: FLOAT["N", 4], w: FLOAT[4, 8], b: FLOAT[8]) -> FLOAT["N", 8]:
    return op.Tanh(op.MatMul(x, w) + b)


@script()
def regressor(x: FLOAT["N", 4]) -> FLOAT["N", 1]:
    return op.MatMul(dense_tanh(x, HIDDEN_W, HIDDEN_B), OUT_W)


def test_a_scripted_model_calling_a_scripted_function_trains_and_goes_back() -> None:
    model = regressor.to_model_proto()
    assert [f.name for f in model.functions] == ["dense_tanh"]
    module = converter.to_torch(model).train()
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal((64, 4)).astype(np.float32))
    target = torch.sin(x.sum(dim=1, keepdim=True))
    optimizer = torch.optim.Adam(module.parameters(), lr=0.05)
    losses = []
    for _ in range(60):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(module(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    module.eval()
    written = module.to_onnx()
    converter.assert_isomorphic(converter.with_weights(model, module.state_dict()), written)
    converter.assert_isomorphic(model, converter.to_torch(model).to_onnx())
    assert [f.name for f in written.functions] == ["dense_tanh"]
    trained = {t.name: onnx.numpy_helper.to_array(t) for t in written.graph.initializer}
    for name in ("hidden.weight", "hidden.bias", "out.weight"):
        np.testing.assert_array_equal(trained[name], module.get_parameter(name.replace(".", "%2E")).detach().numpy())
    probe = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(run(written, [probe])[0], module(torch.from_numpy(probe)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def _function_weight_model() -> onnx.ModelProto:
    """``y = dense(dense(x))`` where ``dense(v) = v @ W`` holds ``W`` as a Constant of its body."""
    weight = onnx.numpy_helper.from_array((np.random.default_rng(7).standard_normal((3, 3)) * 0.5).astype(np.float32))
    dense = oh.make_function("my.nn", "dense", ["v"], ["out"],
                             [oh.make_node("Constant", [], ["w"], value=weight), oh.make_node("MatMul", ["v", "w"], ["out"])],
                             [oh.make_opsetid("", 17)])
    graph = oh.make_graph([oh.make_node("dense", ["x"], ["h"], domain="my.nn"),
                           oh.make_node("dense", ["h"], ["y"], domain="my.nn")], "main",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3])])
    return oh.make_model(graph, functions=[dense], ir_version=10,
                         opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("my.nn", 1)])


def test_a_weight_constant_of_a_function_body_trains_once_for_every_call() -> None:
    model = _function_weight_model()
    module = converter.to_torch(model).train()
    assert [name for name, _ in module.named_parameters()] == ["my%2Enn::dense/w"]
    assert list(module.state_dict()) == ["my%2Enn::dense/w"]
    x = np.random.default_rng(8).standard_normal((4, 3)).astype(np.float32)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    module(torch.from_numpy(x)).square().sum().backward()
    optimizer.step()
    written = module.to_onnx()
    trained = module.get_parameter("my%2Enn::dense/w").detach().numpy()
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(written.functions[0].node[0].attribute[0].t), trained)
    np.testing.assert_allclose(run(written, [x])[0], x @ trained @ trained, rtol=1e-5, atol=1e-6)
    converter.assert_isomorphic(converter.with_weights(model, module.state_dict()), written)
    from dsl.errors import DslError

    with pytest.raises(DslError, match=r"did you mean 'my%2Enn::dense/w'"):
        converter.with_weights(model, {"my%2Enn::dense/W": torch.zeros(3, 3)})
