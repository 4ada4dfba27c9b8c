"""dsl.shape_rules_inputs: the rank and size rules on a bias, scale, statistics, target or
weight beside an op's main operand.  The oracle is the installed onnxruntime: a model of
one node with static shapes (as the compiler writes them) must be refused by onnxruntime,
when loading it or running it, exactly when the rule refuses the node; and a function
breaking a rule gets the same located message eagerly and compiled."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

import dsl
from dsl import FLOAT, INT64, shape_rules
from dsl import opset18 as op
from dsl.errors import DslError
from dsl.opsets import get_opset
from dsl.shape_rules_inputs import check_element_types

I64 = {1: np.int64}
# (op, input shapes (None: omitted), attributes, element types by input index)
CASES: list[tuple[str, list[Any], dict[str, Any], dict[int, Any]]] = [
    *[("Conv", [(2, 4, 5, 5), (6, 4, 3, 3), bias], {}, {}) for bias in [(6,), (1, 6), (1,), (3,), (), (6, 1)]],
    ("Conv", [(2, 4, 5, 5, 5), (6, 4, 3, 3, 3), (1, 6)], {}, {}),
    ("Conv", [(2, 4, 5, 5), (6, 2, 3, 3), (6,)], {"group": 2}, {}),
    *[(conv, [(1, 3, 4, 4, 4), (2, 3, 2, 2, 2) if conv == "Conv" else (3, 2, 2, 2, 2)], {name: [value] * count}, {})
      for conv in ("Conv", "ConvTranspose")
      for name, value, counts in (("strides", 1, (2, 3)), ("dilations", 1, (3, 4)), ("kernel_shape", 2, (2, 3)),
                                  ("pads", 0, (3, 6))) for count in counts],
    *[("ConvTranspose", [(2, 4, 5, 5), (4, 3, 3, 3), bias], {"group": group}, {})
      for bias in [(3,), (6,), (1, 6), (1,), ()] for group in (1, 2)],
    *[("BatchNormalization", [(2, 4, 5), *[stat if k == position else (4,) for k in range(4)]], {}, {})
      for position in range(4) for stat in [(4,), (1, 4), (1,), (3,), ()]],
    ("BatchNormalization", [(2, 4), (4,), (4,), (4,), (4,)], {}, {}),
    ("BatchNormalization", [(4,), (4,), (4,), (4,), (4,)], {}, {}),
    ("BatchNormalization", [(4,), (1,), (1,), (1,), (1,)], {}, {}),
    *[("InstanceNormalization", [(2, 4, 5), *([stat, (4,)] if first else [(4,), stat])], {}, {})
      for first in (True, False) for stat in [(4,), (1, 4), (1,), (3,), ()]],
    ("InstanceNormalization", [(2, 4), (4,), (4,)], {}, {}),
    *[("LayerNormalization", [(2, 4, 5), scale, *([] if bias is None else [bias])], {"axis": axis}, {})
      for axis in (-1, 1, 0) for scale, bias in [((5,), None), ((1,), None), ((1, 5), None), ((4, 5), None),
                                                  ((2, 4, 5), None), ((3,), None), ((4, 1), None),
                                                  ((3, 5), None), ((2, 5), None), ((1, 2, 4, 5), None),
                                                  ((2, 1, 5), None), ((5,), (3,)), ((5,), (4, 5))]],
    ("LayerNormalization", [(2, 4, 5), (5,)], {"axis": 3}, {}),
    ("LayerNormalization", [(2, 4, 5), (5,)], {"axis": -4}, {}),
    *[(loss, [scores, target], {"reduction": "none"}, I64) for loss in ("NegativeLogLikelihoodLoss",
                                                                         "SoftmaxCrossEntropyLoss")
      for scores, target in [((3, 5), (3,)), ((3, 5), (3, 1)), ((3, 5), ()), ((3, 5, 2), (3, 2)), ((3, 5, 2), (3,)),
                             ((3, 5, 2), (3, 3)), ((3, 5), (4,)), ((3, 5, 2), (2, 2)), ((3, 5), (3, 5)), ((5,), ())]],
    *[(loss, [(3, 5), (3,), weight], {}, I64) for loss in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
      for weight in [(5,), (4,), (1,), (1, 5), (5, 1), ()]],
    *[("Range", shapes, {}, {}) for shapes in [[(), (), ()], [(1,), (), ()], [(), (1,), ()], [(), (3,), ()],
                                                [(), (), (1,)], [(), (1, 1), ()], [(), (2,), ()], [(2,), (), ()]]],
    *[("Clip", [(3, 3), *bounds], {}, {}) for bounds in [[()], [(1,)], [(3,)], [(1, 1)], [(), (2,)], [(1,), ()]]],
    *[("TopK", [(3, 3), k], {}, {1: np.int64}) for k in [(), (1,), (2,), (1, 1)]],
    *[("Pad", [(3, 3), pads], {}, {1: np.int64}) for pads in [(4,), (2, 2), (3,), (1, 4), (6,)]],
    *[("Pad", [(3, 3), (4,), value], {}, {1: np.int64}) for value in [(), (1,), (2,), (1, 1)]],
    *[("OneHot", [(3,), depth, values], {}, {0: np.int64, 1: np.int64})
      for depth, values in [((), (2,)), ((1,), (2,)), ((2,), (2,)), ((), (3,)), ((), (1, 2)), ((), ())]],
    *[("Split", [(3, 3), sizes], {}, I64) for sizes in [(3,), (), (1, 3), (3, 1)]],
    *[(elements, [(3, 3), indices, *([] if elements == "GatherElements" else [updates])], {"axis": 1},
       {1: np.int64}) for elements in ("GatherElements", "ScatterElements")
      for indices, updates in [((3, 3), (3, 3)), ((3, 1), (3, 1)), ((3, 1, 3), (3, 1, 3)), ((3,), (3,)),
                               ((2, 2), (2, 2)), ((3, 1), (3, 2)), ((3, 1), (3,)), ((2, 2), (2, 1))]],
    *[("ScatterND", [(3, 4, 5), indices, updates], {}, {1: np.int64})
      for indices, updates in [((2, 1), (2, 4, 5)), ((2, 2), (2, 5)), ((2, 3), (2,)), ((2, 1), (2, 5)), ((2, 2), (2, 4)),
                               ((1, 2), (3,)), ((2, 4), (2,)), ((2, 1), (1, 4, 5)), ((2, 2, 1), (2, 2, 4, 5)),
                               ((3,), ()), ((2, 1), (2, 1, 4, 5)), ((2, 2), (2, 5, 1))]],
    *[("Gemm", [a, b, c], {}, {}) for a, b in [((3, 4), (4, 5)), ((1, 4), (4, 5)), ((3, 4), (4, 1))]
      for c in [(3, 5), (5,), (3, 1), (1,), (), (1, 5), (2, 5), (1, 1, 5), (3,)]],
]


def _model(op_type: str, shapes: list[Any], attributes: dict[str, Any], elems: dict[int, Any],
           opset: int = 18) -> tuple[Any, dict]:
    names = ["" if shape is None else f"in{index}" for index, shape in enumerate(shapes)]
    inputs, feeds = [], {}
    rng = np.random.default_rng(0)
    for index, shape in enumerate(shapes):
        if shape is None:
            continue
        dtype = np.dtype(elems.get(index, np.float32))
        inputs.append(helper.make_tensor_value_info(names[index], helper.np_dtype_to_tensor_dtype(dtype), list(shape)))
        feeds[names[index]] = (np.zeros(shape, dtype) if dtype.kind == "i" and op_type != "Mod" else
                               np.asarray(rng.random(shape) * 4 + 1).astype(dtype))  # (never 0: a Mod divisor)
    if op_type == "Split":  # (sizes of 1 that add up to the axis; one output per size)
        feeds["in1"] = np.ones(shapes[1], np.int64)
    if op_type == "TopK":  # (k within the axis)
        feeds["in1"] = np.ones(shapes[1], np.int64)
    if op_type == "OneHot":  # (a depth above the indices)
        feeds["in1"] = np.full(shapes[1], 4, np.int64)
    count = shapes[1][0] if op_type == "Split" and len(shapes[1]) == 1 else 2 if op_type == "TopK" else 1
    outputs = [f"out{index}" for index in range(count)]
    node = helper.make_node(op_type, names, outputs, **attributes)
    graph = helper.make_graph([node], "one_node", inputs, [onnx.ValueInfoProto(name=name) for name in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), feeds


def _onnxruntime_refuses(model: Any, feeds: dict) -> bool:
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except (onnxruntime.capi.onnxruntime_pybind11_state.Fail,
            onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument,
            onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException):
        return True
    return False


def _rule_refuses(op_type: str, shapes: list[Any], attributes: dict[str, Any], version: int = 18) -> bool:
    try:
        shape_rules.infer(op_type, shapes, [f"in{i}" for i in range(len(shapes))], attributes,
                          [None] * len(shapes), None, version)
    except DslError:
        return True
    return False


@pytest.fixture(scope="module", autouse=True)
def _quiet_onnxruntime() -> Any:
    onnxruntime.set_default_logger_severity(4)  # the refused models log errors
    yield
    onnxruntime.set_default_logger_severity(2)


@pytest.mark.parametrize(("op_type", "shapes", "attributes", "elems"), CASES,
                         ids=[f"{c[0]}-{'-'.join(map(str, c[1]))}-{c[2]}" for c in CASES])
def test_rule_refuses_exactly_what_onnxruntime_refuses(op_type: str, shapes: list[Any], attributes: dict[str, Any],
                                                       elems: dict[int, Any]) -> None:
    model, feeds = _model(op_type, shapes, attributes, elems)
    assert _rule_refuses(op_type, shapes, attributes) == _onnxruntime_refuses(model, feeds)


def test_the_table_holds_both_verdicts() -> None:
    """(a table where the rule refuses nothing, or everything, would prove little)"""
    verdicts = [_rule_refuses(c[0], c[1], c[2]) for c in CASES]
    assert 20 < sum(verdicts) < len(verdicts) - 20


def test_symbolic_sizes_are_never_refused() -> None:
    assert not _rule_refuses("Conv", [("N", 4, 5, 5), ("M", 4, 3, 3), ("K",)], {})
    assert not _rule_refuses("NegativeLogLikelihoodLoss", [("N", 5), ("B",)], {})
    assert not _rule_refuses("BatchNormalization", [("N", "C", 5), ("S",), ("S",), ("S",), ("S",)], {})


@dsl.script()
def conv_with_row_bias(x: FLOAT[2, 4, 5, 5], w: FLOAT[6, 4, 3, 3], b: FLOAT[1, 6]) -> FLOAT[2, 6, 3, 3]:
    return op.Conv(x, w, b)


@dsl.script()
def nll_with_column_target(scores: FLOAT[3, 5], target: INT64[3, 1]) -> FLOAT:
    return op.NegativeLogLikelihoodLoss(scores, target)


@dsl.script()
def batch_norm_with_short_scale(x: FLOAT[2, 4, 5], scale: FLOAT[3], bias: FLOAT[4], mean: FLOAT[4],
                                var: FLOAT[4]) -> FLOAT[2, 4, 5]:
    return op.BatchNormalization(x, scale, bias, mean, var)


@dsl.script()
def range_to_a_vector(limit: FLOAT[3]) -> FLOAT["N"]:
    return op.Range(op.Constant(value_float=0.0), limit, op.Constant(value_float=1.0))


@dsl.script()
def scatter_with_deeper_indices(data: FLOAT[3, 3], indices: INT64[3, 1, 3], updates: FLOAT[3, 1, 3]) -> FLOAT[3, 3]:
    return op.ScatterElements(data, indices, updates, axis=1)


@dsl.script()
def clip_below_a_vector(x: FLOAT[3, 3], low: FLOAT[3]) -> FLOAT[3, 3]:
    return op.Clip(x, low)


@pytest.mark.parametrize(("function", "arrays", "words"), [
    (clip_below_a_vector, [(3, 3), (3,)], "Clip: the min low: [3] must be a scalar"),
    (range_to_a_vector, [(3,)], "Range: the limit limit: [3] must be a scalar"),
    (scatter_with_deeper_indices, [(3, 3), (3, 1, 3), (3, 1, 3)], "indices: [3, 1, 3] has rank 3, data: [3, 3] rank 2"),
    (conv_with_row_bias, [(2, 4, 5, 5), (6, 4, 3, 3), (1, 6)], "the bias b: [1, 6] must be 1-D"),
    (nll_with_column_target, [(3, 5), (3, 1)], "target: [3, 1] has rank 2, but scores: [3, 5] needs a target of rank 1"),
    (batch_norm_with_short_scale, [(2, 4, 5), (3,), (4,), (4,), (4,)], "the scale scale: [3] has 3 values"),
], ids=["clip-min", "range-limit", "scatter-indices", "conv-bias", "nll-target", "batchnorm-scale"])
def test_the_same_located_message_eagerly_and_compiled(function: Any, arrays: list[Any], words: str) -> None:
    with pytest.raises(DslError) as compiled:
        function.to_model_proto()
    inputs = [np.zeros(shape, np.int64) if index == 1 and function in (nll_with_column_target,
                                                                         scatter_with_deeper_indices) else
              np.ones(shape, np.float32) for index, shape in enumerate(arrays)]
    with pytest.raises(DslError) as eager:
        function(*inputs)
    assert words in compiled.value.message
    assert eager.value.message == compiled.value.message
    assert eager.value.hint == compiled.value.hint and compiled.value.hint
    assert eager.value.location.line == compiled.value.location.line
    assert compiled.value.location.source_line.strip().startswith("return op.")  # the user's line


def _latest_opset_onnxruntime_loads() -> int:
    """The newest default-domain opset of the installed onnx that the installed onnxruntime loads."""
    for version in range(onnx.defs.onnx_opset_version(), 12, -1):
        model, feeds = _model("Mod", [(3,), (3,)], {}, {0: np.int64, 1: np.int64}, version)
        if not _onnxruntime_refuses(model, feeds):
            return version
    raise AssertionError("onnxruntime loads no opset of Mod-13 or later")


MOD_CASES = [(opset, dtype, fmod) for opset in (13, 18, "latest")
             for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64) for fmod in (0, 1)]


@pytest.mark.parametrize(("opset", "dtype", "fmod"), MOD_CASES)
def test_mod_element_types_refused_exactly_as_onnxruntime(opset: Any, dtype: Any, fmod: int) -> None:
    """(before Mod-28, fmod=0 is for integers: onnxruntime refuses floats when the model runs)"""
    version = _latest_opset_onnxruntime_loads() if opset == "latest" else opset
    model, feeds = _model("Mod", [(3,), (3,)], {"fmod": fmod}, {0: dtype, 1: dtype}, version)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    try:
        check_element_types("Mod", onnx.defs.get_schema("Mod", version).since_version, [elem, elem], {"fmod": fmod})
        refused = False
    except DslError:
        refused = True
    assert refused == _onnxruntime_refuses(model, feeds)


@dsl.script()
def float_mod(a: FLOAT[3], b: FLOAT[3]) -> FLOAT[3]:
    return op.Mod(a, b)


def test_float_mod_gets_the_same_located_message_eagerly_and_compiled() -> None:
    with pytest.raises(DslError) as compiled:
        float_mod.to_model_proto()
    with pytest.raises(DslError) as eager:
        float_mod(np.ones(3, np.float32), np.ones(3, np.float32))
    assert "fmod=0 (Python's %) is defined for integers only before opset 28" in compiled.value.message
    assert (eager.value.message, eager.value.hint, eager.value.location.line) == (
        compiled.value.message, compiled.value.hint, compiled.value.location.line)
    assert compiled.value.location.source_line.strip() == "return op.Mod(a, b)"


@pytest.mark.parametrize("data", [(3, 1), (1,), (), (2, 1, 4)])
def test_expand_to_a_shape_computed_at_run_time_keeps_its_rank(data: tuple[int, ...]) -> None:
    """(numpy's broadcasting is the oracle: every size the rule states is the one numpy gives)"""
    [inferred] = shape_rules.infer("Expand", [data, (3,)], ["x", "shape"], {}, [None, None])
    assert inferred is not None and len(inferred) == 3
    for target in [(1, 1, 1), (2, 3, 1), (2, 3, 4), (1, 1, 4)]:
        try:
            expected = np.broadcast_shapes(data, target)
        except ValueError:
            continue
        assert all(size is None or size == want for size, want in zip(inferred, expected))
    assert [size for size in inferred if size is not None] == [size for size in data if size != 1]


@dsl.script()
def conv_with_a_bias_built_at_run_time(x: FLOAT[1, 3, 4, 4, 4], w: FLOAT[2, 3, 2, 2, 2]) -> FLOAT[1, 2, 3, 3, 3]:
    channels = op.Shape(w, start=0, end=1)
    bias = op.Expand(op.CastLike(0.0, x), op.Concat(channels, op.Constant(value_ints=[2]), axis=0))
    return op.Conv(x, w, bias)


def test_a_bias_of_the_wrong_rank_built_at_run_time_is_refused_where_the_conv_is() -> None:
    """(torch_lib's conv3d without a bias builds one of shape [M, 2]: onnxruntime refuses the
    model when it runs; the compiler knows the rank of the Expand and refuses it at the Conv)"""
    with pytest.raises(DslError) as compiled:
        conv_with_a_bias_built_at_run_time.to_model_proto()
    with pytest.raises(DslError) as eager:
        conv_with_a_bias_built_at_run_time(np.ones((1, 3, 4, 4, 4), np.float32), np.ones((2, 3, 2, 2, 2), np.float32))
    assert "Conv: the bias bias: [?, ?] must be 1-D" in compiled.value.message
    assert "Conv: the bias bias: [2, 2] must be 1-D" in eager.value.message
    assert eager.value.location.line == compiled.value.location.line
    assert compiled.value.location.source_line.strip() == "return op.Conv(x, w, bias)"


def _refused_at(op_type: str, shapes: list[Any], attributes: dict[str, Any], opset: int) -> bool:
    model, feeds = _model(op_type, shapes, attributes, {}, opset)
    return _onnxruntime_refuses(model, feeds)


def _first_opset_loaded(op_type: str, shapes: list[Any], attributes: dict[str, Any]) -> int | None:
    """The first opset (of those that define ``op_type``) at which onnxruntime runs a fitting node."""
    since = onnx.defs.get_schema(op_type, onnx.defs.onnx_opset_version()).since_version
    for version in range(since, onnx.defs.onnx_opset_version() + 1):
        if not _refused_at(op_type, shapes, attributes, version):
            return version
    return None


@pytest.mark.parametrize(("op_type", "shapes", "attributes"), [
    *[("RMSNormalization", [(2, 4, 5), scale], {"axis": axis}) for axis in (-1, 1)
      for scale in [(5,), (1,), (4, 5), (3,), (2, 4, 5), (1, 2, 4, 5), (2, 5), (4, 1)]],
    ("RMSNormalization", [(2, 4, 5), (5,)], {"axis": 3}),
    *[("GroupNormalization", [(2, channels, 5), (1,), (1,)], {"num_groups": groups})
      for channels, groups in [(4, 2), (4, 3), (6, 3), (6, 4), (4, 4), (4, 1)]],
])
def test_newer_normalizations_refused_exactly_as_onnxruntime(op_type: str, shapes: list[Any],
                                                             attributes: dict[str, Any]) -> None:
    """(at the first opset the installed onnxruntime runs the op at)"""
    fitting = [shapes[0], (shapes[0][-1],)] if op_type == "RMSNormalization" else [(2, 4, 5), (1,), (1,)]
    version = _first_opset_loaded(op_type, fitting, {"num_groups": 2} if op_type == "GroupNormalization" else {})
    if version is None:
        pytest.skip(f"the installed onnxruntime runs no opset of {op_type}")
    assert _rule_refuses(op_type, shapes, attributes) == _refused_at(op_type, shapes, attributes, version)


GROUP_SCALES = [(1,), (2,), (3,), (4,), (6,), (8,), (12,), (), (1, 1), (2, 1), (3, 1), (4, 1), (6, 1), (1, 2, 1)]


@pytest.mark.parametrize("rule_of", [18, 21])
@pytest.mark.parametrize(("channels", "groups"), [(4, 2), (6, 3)])
def test_group_normalization_scale_and_bias_refused_exactly_as_onnxruntime(rule_of: int, channels: int,
                                                                           groups: int) -> None:
    """(one value a group before opset 21, a channel from 21; at the first opset of each
    that the installed onnxruntime runs)"""
    fitting = [(2, channels, 5), (groups if rule_of < 21 else channels,), (1,)]
    version = next((v for v in range(rule_of, (rule_of + 3) if rule_of < 21 else onnx.defs.onnx_opset_version() + 1)
                    if not _refused_at("GroupNormalization", fitting, {"num_groups": groups}, v)), None)
    if version is None:
        pytest.skip(f"the installed onnxruntime runs GroupNormalization-{rule_of} at no opset")
    for scale in GROUP_SCALES:
        for bias in (scale, (1,)):
            shapes = [(2, channels, 5), scale, bias]
            refused = _refused_at("GroupNormalization", shapes, {"num_groups": groups}, version)
            assert _rule_refuses("GroupNormalization", shapes, {"num_groups": groups}, version) == refused, shapes


@pytest.mark.parametrize(("version", "wrong", "message"), [
    # (GroupNormalization-18 is deprecated: the compiler refuses it at opsets 18-20)
    (21, 2, "the scale s: [2] holds 2 values, but from opset 21 GroupNormalization takes one value a channel "
            "(4 channels)"),
])
def test_a_group_normalization_scale_of_the_wrong_size_is_refused_at_its_line_both_ways(
        version: int, wrong: int, message: str) -> None:
    ops = get_opset("", version)

    @dsl.script()
    def normalized(x: FLOAT[2, 4, 5], s: FLOAT[wrong], b: FLOAT[1]) -> FLOAT[2, 4, 5]:
        return ops.GroupNormalization(x, s, b, num_groups=2)

    with pytest.raises(DslError) as compiled:
        normalized.to_model_proto()
    assert message in compiled.value.message
    assert compiled.value.location.source_line.strip() == "return ops.GroupNormalization(x, s, b, num_groups=2)"
    if _refused_at("GroupNormalization", [(2, 4, 5), (2 if version < 21 else 4,), (1,)], {"num_groups": 2}, version):
        return  # (the installed onnxruntime does not run this opset's GroupNormalization: eager mode cannot)
    with pytest.raises(DslError) as eager:
        normalized(np.ones((2, 4, 5), np.float32), np.ones(wrong, np.float32), np.ones(1, np.float32))
    assert message in eager.value.message and eager.value.location.line == compiled.value.location.line


LOSS_CASES = [case for case in CASES if case[0] in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")]


@pytest.mark.parametrize(("op_type", "shapes", "attributes", "elems"), LOSS_CASES,
                         ids=[f"{c[0]}-{'-'.join(map(str, c[1]))}" for c in LOSS_CASES])
def test_an_eager_loss_call_is_refused_exactly_when_its_exported_model_is(
        op_type: str, shapes: list[Any], attributes: dict[str, Any], elems: dict[int, Any]) -> None:
    """(onnxruntime runs a target shorter than the scores in a session of unknown shapes; a
    model with the call's static shapes does not load, so eager mode asks the rule first)"""
    model, feeds = _model(op_type, shapes, attributes, elems)
    try:
        getattr(op, op_type)(*feeds.values(), **attributes)
        refused = False
    except DslError as error:
        refused = True
        assert error.location is not None and error.location.line > 0  # (this test's line)
    assert refused == _onnxruntime_refuses(model, feeds)
