"""Small ONNX models for the torch back end's tests, written with ``onnx.helper``.

Written by hand rather than exported from torch, so the tests compare the converted
module with independent oracles: onnxruntime on the same proto, and torch's own layers
(``torch.nn.BatchNorm2d``) for training semantics.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
from onnx import TensorProto, numpy_helper

OPSET = 17


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def cnn(channels: int = 4, classes: int = 3, momentum: float = 0.8, seed: int = 0) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> MaxPool -> Flatten -> Dropout -> Gemm, batch dimension "N".

    Weight names hold dots, as exported models' do (``conv.weight``), and the shape of
    the Reshape is an int64 initializer (a buffer, folded into the call).
    """
    rng = np.random.default_rng(seed)
    weights = [
        _init("conv.weight", (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32)),
        _init("conv.bias", (rng.standard_normal(channels) * 0.1).astype(np.float32)),
        _init("bn.weight", (1.0 + 0.1 * rng.standard_normal(channels)).astype(np.float32)),
        _init("bn.bias", (0.1 * rng.standard_normal(channels)).astype(np.float32)),
        _init("bn.running_mean", (0.1 * rng.standard_normal(channels)).astype(np.float32)),
        _init("bn.running_var", (1.0 + 0.2 * rng.random(channels)).astype(np.float32)),
        _init("flat_shape", np.array([0, -1], dtype=np.int64)),
        _init("fc.weight", (rng.standard_normal((classes, channels * 4 * 4)) * 0.2).astype(np.float32)),
        _init("fc.bias", np.zeros(classes, dtype=np.float32)),
    ]
    nodes = [
        oh.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["conv_out"], pads=[1, 1, 1, 1]),
        oh.make_node("BatchNormalization", ["conv_out", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                     ["bn_out"], epsilon=1e-3, momentum=momentum),
        oh.make_node("Relu", ["bn_out"], ["relu_out"]),
        oh.make_node("MaxPool", ["relu_out"], ["pool_out"], kernel_shape=[2, 2], strides=[2, 2]),
        oh.make_node("Reshape", ["pool_out", "flat_shape"], ["features"]),
        oh.make_node("Dropout", ["features"], ["dropped"]),
        oh.make_node("Gemm", ["dropped", "fc.weight", "fc.bias"], ["logits"], transB=1),
    ]
    graph = oh.make_graph(
        nodes, "cnn",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [oh.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
        weights,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)])


def control_flow(seed: int = 0) -> onnx.ModelProto:
    """If, Loop and Scan in one model, each body reading a weight of the main graph.

    ``y = If(sum(x) > 0, x * w, x - w)``; ``z = Loop(3 times: z = z * w + 1)`` with the
    running value collected as a scan output; ``s = Scan(cumulative sum of the rows of x)``.
    """
    rng = np.random.default_rng(seed)
    weight = (1.0 + 0.1 * rng.standard_normal(4)).astype(np.float32)
    then_branch = oh.make_graph([oh.make_node("Mul", ["x", "w"], ["then_out"])], "then", [],
                                [oh.make_tensor_value_info("then_out", TensorProto.FLOAT, None)])
    else_branch = oh.make_graph([oh.make_node("Sub", ["x", "w"], ["else_out"])], "else", [],
                                [oh.make_tensor_value_info("else_out", TensorProto.FLOAT, None)])
    loop_body = oh.make_graph(
        [oh.make_node("Mul", ["z_in", "w"], ["z_scaled"]), oh.make_node("Add", ["z_scaled", "one"], ["z_out"]),
         oh.make_node("Identity", ["cond_in"], ["cond_out"]), oh.make_node("Identity", ["z_out"], ["z_seen"])],
        "loop_body",
        [oh.make_tensor_value_info("i", TensorProto.INT64, []), oh.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         oh.make_tensor_value_info("z_in", TensorProto.FLOAT, None)],
        [oh.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         oh.make_tensor_value_info("z_out", TensorProto.FLOAT, None),
         oh.make_tensor_value_info("z_seen", TensorProto.FLOAT, None)],
    )
    scan_body = oh.make_graph(
        [oh.make_node("Add", ["total_in", "row"], ["total_out"]), oh.make_node("Identity", ["total_out"], ["row_out"])],
        "scan_body",
        [oh.make_tensor_value_info("total_in", TensorProto.FLOAT, [4]), oh.make_tensor_value_info("row", TensorProto.FLOAT, [4])],
        [oh.make_tensor_value_info("total_out", TensorProto.FLOAT, [4]),
         oh.make_tensor_value_info("row_out", TensorProto.FLOAT, [4])],
    )
    nodes = [
        oh.make_node("ReduceSum", ["x"], ["x_sum"], keepdims=0),
        oh.make_node("Greater", ["x_sum", "zero"], ["positive"]),
        oh.make_node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch),
        oh.make_node("Loop", ["trips", "", "x"], ["z", "z_steps"], body=loop_body),
        oh.make_node("Scan", ["start", "x"], ["s_total", "s"], body=scan_body, num_scan_inputs=1),
    ]
    graph = oh.make_graph(
        nodes, "control_flow",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [oh.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "z", "z_steps", "s")],
        [_init("w", weight), _init("zero", np.array(0.0, np.float32)), _init("one", np.array(1.0, np.float32)),
         _init("trips", np.array(3, np.int64)), _init("start", np.zeros(4, np.float32))],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)])
