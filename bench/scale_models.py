"""The models ``bench/scale.py`` measures, built with ``onnx.helper`` (no download, no torch).

- :func:`large_model`: a stack of MatMul/Add/Relu layers whose weights (>= 2 GB by
  default) are written straight to an external-data file, one layer at a time, so the
  process building it never holds them all;
- :func:`cnn`, :func:`transformer_encoder`, :func:`lstm`: small realistic models for the
  ``eager.run(capture=True)`` against one onnxruntime session comparison;
- :func:`torch_transformer_encoder`, :func:`torch_lstm`: ``nn.TransformerEncoder`` and
  ``nn.LSTM`` as ``torch.onnx.export`` writes them (the TorchScript exporter, which needs
  no onnxscript; None without torch);
- :func:`branch_weights_model`: a voice-activity detector shaped like silero-vad's: a main
  graph of three nodes whose If picks one of two branches, each holding its weights in
  Constant nodes, a convolutional STFT and encoder, an LSTM cell over a state input and a
  dense head.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper

F = onnx.TensorProto.FLOAT
OPSET = [oh.make_opsetid("", 18)]


def large_model(folder: str, weights_bytes: int, width: int = 4096) -> tuple[str, int]:
    """Write ``model.onnx`` + ``model.data`` into ``folder``; returns the path and the weights' size."""
    layer_bytes = width * width * 4 + width * 4
    layers = max(1, -(-weights_bytes // layer_bytes))
    rng = np.random.default_rng(0)
    nodes, initializers = [], []
    offset = 0
    previous = "x"
    with open(os.path.join(folder, "model.data"), "wb") as data:
        for layer in range(layers):
            for name, shape in ((f"w{layer}", (width, width)), (f"b{layer}", (width,))):
                array = (rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(width)))
                array.tofile(data)
                tensor = onnx.TensorProto(name=name, data_type=F, dims=shape, data_location=onnx.TensorProto.EXTERNAL)
                for key, value in (("location", "model.data"), ("offset", str(offset)), ("length", str(array.nbytes))):
                    tensor.external_data.add(key=key, value=value)
                initializers.append(tensor)
                offset += array.nbytes
                del array
            nodes += [oh.make_node("MatMul", [previous, f"w{layer}"], [f"m{layer}"]),
                      oh.make_node("Add", [f"m{layer}", f"b{layer}"], [f"a{layer}"]),
                      oh.make_node("Relu", [f"a{layer}"], [f"h{layer}"])]
            previous = f"h{layer}"
    graph = oh.make_graph(nodes, "large", [oh.make_tensor_value_info("x", F, [1, width])],
                          [oh.make_tensor_value_info(previous, F, [1, width])], initializers)
    path = os.path.join(folder, "model.onnx")
    onnx.save_model(oh.make_model(graph, opset_imports=OPSET, ir_version=10), path)
    return path, offset


def _weight(rng: np.random.Generator, name: str, shape: tuple[int, ...], scale: float = 0.1) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def cnn() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """ResNet-18 as exporters write it in eval mode: batch norms folded into the convolutions'
    biases, a 7x7 stem, max pooling, 4 stages of 2 residual blocks, pooling, a dense head."""
    rng = np.random.default_rng(1)
    nodes: list[onnx.NodeProto] = []
    weights: list[onnx.TensorProto] = []

    def conv(x: str, cin: int, cout: int, stride: int, name: str, kernel: int = 3, relu: bool = True) -> str:
        weights.append(_weight(rng, f"{name}_w", (cout, cin, kernel, kernel), float(np.sqrt(2 / (kernel**2 * cin)))))
        weights.append(_weight(rng, f"{name}_b", (cout,), 0.01))
        pad = kernel // 2
        nodes.append(oh.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], pads=[pad] * 4,
                                  strides=[stride] * 2, kernel_shape=[kernel] * 2))
        if not relu:
            return f"{name}_c"
        nodes.append(oh.make_node("Relu", [f"{name}_c"], [f"{name}_r"]))
        return f"{name}_r"

    stem = conv("image", 3, 64, 2, "stem", kernel=7)
    nodes.append(oh.make_node("MaxPool", [stem], ["pooled0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = "pooled0", 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if block == 0 and stage > 0 else 1
            name = f"s{stage}b{block}"
            y = conv(conv(x, cin, cout, stride, name + "a"), cout, cout, 1, name + "b", relu=False)
            if stride != 1 or cin != cout:
                x = conv(x, cin, cout, stride, name + "down", kernel=1, relu=False)
            nodes += [oh.make_node("Add", [y, x], [name + "_sum"]), oh.make_node("Relu", [name + "_sum"], [name])]
            x, cin = name, cout
    weights += [_weight(rng, "fc_w", (512, 1000), 0.05), _weight(rng, "fc_b", (1000,), 0.01)]
    nodes += [oh.make_node("GlobalAveragePool", [x], ["pooled"]), oh.make_node("Flatten", ["pooled"], ["flat"]),
              oh.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"])]
    graph = oh.make_graph(nodes, "cnn", [oh.make_tensor_value_info("image", F, [1, 3, 224, 224])],
                          [oh.make_tensor_value_info("logits", F, [1, 1000])], weights)
    image = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    return oh.make_model(graph, opset_imports=OPSET, ir_version=10), {"image": image}


def transformer_encoder(layers: int = 4, d_model: int = 256, heads: int = 4, tokens: int = 64) -> tuple[
        onnx.ModelProto, dict[str, np.ndarray]]:
    """Post-norm encoder layers as exporters write them: projections, heads split by
    Reshape/Transpose, scaled Softmax attention, LayerNormalization, a GELU-free MLP."""
    rng = np.random.default_rng(2)
    nodes: list[onnx.NodeProto] = []
    weights = [onnx.numpy_helper.from_array(np.array([1, tokens, heads, d_model // heads], np.int64), "split_shape"),
               onnx.numpy_helper.from_array(np.array([1, tokens, d_model], np.int64), "merge_shape"),
               onnx.numpy_helper.from_array(np.array(1 / np.sqrt(d_model // heads), np.float32), "scale")]
    add: Callable[..., None] = lambda *args, **kw: nodes.append(oh.make_node(*args, **kw))  # noqa: E731
    x = "tokens"
    for i in range(layers):
        p = f"l{i}_"
        for part in ("q", "k", "v", "o"):
            weights += [_weight(rng, p + part + "_w", (d_model, d_model)), _weight(rng, p + part + "_b", (d_model,))]
        weights += [_weight(rng, p + "up_w", (d_model, 4 * d_model)), _weight(rng, p + "up_b", (4 * d_model,)),
                    _weight(rng, p + "down_w", (4 * d_model, d_model)), _weight(rng, p + "down_b", (d_model,))]
        for norm in ("n1", "n2"):
            weights += [onnx.numpy_helper.from_array(np.ones(d_model, np.float32), p + norm + "_g"),
                        onnx.numpy_helper.from_array(np.zeros(d_model, np.float32), p + norm + "_b")]
        for part in ("q", "k", "v"):
            add("MatMul", [x, p + part + "_w"], [p + part + "_mm"])
            add("Add", [p + part + "_mm", p + part + "_b"], [p + part])
            add("Reshape", [p + part, "split_shape"], [p + part + "_split"])
            add("Transpose", [p + part + "_split"], [p + part + "_heads"],
                perm=[0, 2, 3, 1] if part == "k" else [0, 2, 1, 3])
        add("MatMul", [p + "q_heads", p + "k_heads"], [p + "scores"])
        add("Mul", [p + "scores", "scale"], [p + "scaled"])
        add("Softmax", [p + "scaled"], [p + "attn"], axis=-1)
        add("MatMul", [p + "attn", p + "v_heads"], [p + "mixed"])
        add("Transpose", [p + "mixed"], [p + "mixed_t"], perm=[0, 2, 1, 3])
        add("Reshape", [p + "mixed_t", "merge_shape"], [p + "merged"])
        add("MatMul", [p + "merged", p + "o_w"], [p + "o_mm"])
        add("Add", [p + "o_mm", p + "o_b"], [p + "o"])
        add("Add", [x, p + "o"], [p + "res1"])
        add("LayerNormalization", [p + "res1", p + "n1_g", p + "n1_b"], [p + "norm1"], axis=-1)
        add("MatMul", [p + "norm1", p + "up_w"], [p + "up_mm"])
        add("Add", [p + "up_mm", p + "up_b"], [p + "up"])
        add("Relu", [p + "up"], [p + "act"])
        add("MatMul", [p + "act", p + "down_w"], [p + "down_mm"])
        add("Add", [p + "down_mm", p + "down_b"], [p + "down"])
        add("Add", [p + "norm1", p + "down"], [p + "res2"])
        add("LayerNormalization", [p + "res2", p + "n2_g", p + "n2_b"], [p + "out"], axis=-1)
        x = p + "out"
    graph = oh.make_graph(nodes, "encoder", [oh.make_tensor_value_info("tokens", F, [1, tokens, d_model])],
                          [oh.make_tensor_value_info(x, F, [1, tokens, d_model])], weights)
    feeds = {"tokens": rng.standard_normal((1, tokens, d_model)).astype(np.float32)}
    return oh.make_model(graph, opset_imports=OPSET, ir_version=10), feeds


def lstm(layers: int = 2, features: int = 64, hidden: int = 256, steps: int = 50) -> tuple[
        onnx.ModelProto, dict[str, np.ndarray]]:
    """Stacked LSTM ops (as torch exports nn.LSTM), the direction axis squeezed between layers, a dense head."""
    rng = np.random.default_rng(3)
    nodes: list[onnx.NodeProto] = []
    weights = [onnx.numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    x, width = "sequence", features
    for i in range(layers):
        weights += [_weight(rng, f"W{i}", (1, 4 * hidden, width)), _weight(rng, f"R{i}", (1, 4 * hidden, hidden)),
                    _weight(rng, f"B{i}", (1, 8 * hidden))]
        nodes.append(oh.make_node("LSTM", [x, f"W{i}", f"R{i}", f"B{i}"], [f"Y{i}", f"H{i}", f"C{i}"],
                                  hidden_size=hidden))
        nodes.append(oh.make_node("Squeeze", [f"Y{i}", "axis1"], [f"seq{i}"]))
        x, width = f"seq{i}", hidden
    weights += [_weight(rng, "head_w", (hidden, 16)), _weight(rng, "head_b", (16,))]
    nodes += [oh.make_node("MatMul", [x, "head_w"], ["head_mm"]), oh.make_node("Add", ["head_mm", "head_b"], ["y"])]
    graph = oh.make_graph(nodes, "lstm", [oh.make_tensor_value_info("sequence", F, [steps, 1, features])],
                          [oh.make_tensor_value_info("y", F, [steps, 1, 16])], weights)
    feeds = {"sequence": rng.standard_normal((steps, 1, features)).astype(np.float32)}
    return oh.make_model(graph, opset_imports=OPSET, ir_version=10), feeds


def _torch_exported(module: object, example: np.ndarray) -> onnx.ModelProto:
    import io
    import warnings

    import torch

    buffer = io.BytesIO()
    with warnings.catch_warnings():  # (the TorchScript exporter's deprecation notice)
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.from_numpy(example),), buffer, dynamo=False, opset_version=17,
                          input_names=["x"])
    return onnx.load_from_string(buffer.getvalue())


def torch_transformer_encoder() -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """``nn.TransformerEncoder`` (4 layers, d_model 128, 4 heads) exported by torch, eval mode."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).eval()
    x = np.random.default_rng(4).standard_normal((1, 32, 128)).astype(np.float32)
    return _torch_exported(encoder, x), {"x": x}


def torch_lstm() -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """``nn.LSTM`` (2 layers, 64 -> 128) over 20 steps exported by torch, eval mode."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    x = np.random.default_rng(5).standard_normal((20, 1, 64)).astype(np.float32)
    return _torch_exported(torch.nn.LSTM(64, 128, num_layers=2).eval(), x), {"x": x}


def _constant(rng: np.random.Generator, name: str, shape: tuple[int, ...], scale: float = 0.1) -> onnx.NodeProto:
    array = (rng.standard_normal(shape) * scale).astype(np.float32)
    return oh.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(array, name))


def _int_constant(name: str, values: list[int]) -> onnx.NodeProto:
    return oh.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(values, np.int64), name))


def _detector_branch(seed: int, stride: int, hidden: int = 64) -> onnx.GraphProto:
    """One branch: framing by a strided Conv (STFT-like, magnitude from the halves), four
    Conv+Relu layers down to one frame, an LSTM step from ``state``, a sigmoid head."""
    rng = np.random.default_rng(seed)
    bins, window = 65, 128
    nodes = [_int_constant("frame_shape", [1, 1, 512]), oh.make_node("Reshape", ["input", "frame_shape"], ["framed"]),
             _constant(rng, "stft_w", (2 * bins, 1, window)),
             oh.make_node("Conv", ["framed", "stft_w"], ["spectrum"], strides=[stride], kernel_shape=[window])]
    nodes += [_int_constant("real_at", [0]), _int_constant("imag_at", [bins]), _int_constant("end_at", [2 * bins]),
              _int_constant("channel_axis", [1]),
              oh.make_node("Slice", ["spectrum", "real_at", "imag_at", "channel_axis"], ["real"]),
              oh.make_node("Slice", ["spectrum", "imag_at", "end_at", "channel_axis"], ["imag"]),
              oh.make_node("Mul", ["real", "real"], ["real2"]), oh.make_node("Mul", ["imag", "imag"], ["imag2"]),
              oh.make_node("Add", ["real2", "imag2"], ["power"]), oh.make_node("Sqrt", ["power"], ["magnitude"])]
    x, channels = "magnitude", bins
    for layer, (width, step) in enumerate(((128, 1), (64, 2), (64, 2), (hidden, 2))):
        nodes += [_constant(rng, f"enc{layer}_w", (width, channels, 3), float(np.sqrt(2 / (3 * channels)))),
                  _constant(rng, f"enc{layer}_b", (width,), 0.01),
                  oh.make_node("Conv", [x, f"enc{layer}_w", f"enc{layer}_b"], [f"enc{layer}_c"], pads=[1, 1],
                               strides=[step], kernel_shape=[3]),
                  oh.make_node("Relu", [f"enc{layer}_c"], [f"enc{layer}"])]
        x, channels = f"enc{layer}", width
    nodes += [_int_constant("time_axis", [2]), _int_constant("last", [-1]), _int_constant("big", [2**31]),
              oh.make_node("Slice", [x, "last", "big", "time_axis"], ["last_frame"]),
              oh.make_node("Transpose", ["last_frame"], ["step_in"], perm=[2, 0, 1]),
              _int_constant("h_at", [0]), _int_constant("c_at", [1]), _int_constant("state_end", [2]),
              _int_constant("state_axis", [0]),
              oh.make_node("Slice", ["state", "h_at", "c_at", "state_axis"], ["h0"]),
              oh.make_node("Slice", ["state", "c_at", "state_end", "state_axis"], ["c0"]),
              _constant(rng, "lstm_w", (1, 4 * hidden, hidden)), _constant(rng, "lstm_r", (1, 4 * hidden, hidden)),
              _constant(rng, "lstm_b", (1, 8 * hidden), 0.01),
              oh.make_node("LSTM", ["step_in", "lstm_w", "lstm_r", "lstm_b", "", "h0", "c0"], ["", "h1", "c1"],
                           hidden_size=hidden),
              oh.make_node("Concat", ["h1", "c1"], ["state_out"], axis=0),
              oh.make_node("Squeeze", ["h1", "state_axis"], ["features"]),
              oh.make_node("Relu", ["features"], ["features_relu"]),
              _constant(rng, "head_w", (hidden, 1)), _constant(rng, "head_b", (1,), 0.01),
              oh.make_node("MatMul", ["features_relu", "head_w"], ["head_mm"]),
              oh.make_node("Add", ["head_mm", "head_b"], ["logit"]),
              oh.make_node("Sigmoid", ["logit"], ["probability"])]
    return oh.make_graph(nodes, f"detector_stride{stride}", [],
                         [oh.make_tensor_value_info("probability", F, [1, 1]),
                          oh.make_tensor_value_info("state_out", F, [2, 1, hidden])])


def branch_weights_model(hidden: int = 64) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """silero-vad's structure: ``If(sr == 16000)`` over two branches that hold every weight."""
    nodes = [oh.make_node("Constant", [], ["rate_16k"], value=onnx.numpy_helper.from_array(np.array(16000, np.int64))),
             oh.make_node("Equal", ["sr", "rate_16k"], ["is_16k"]),
             oh.make_node("If", ["is_16k"], ["output", "stateN"], name="by_rate",
                          then_branch=_detector_branch(6, 64, hidden), else_branch=_detector_branch(7, 32, hidden))]
    graph = oh.make_graph(nodes, "detector",
                          [oh.make_tensor_value_info("input", F, [1, 512]),
                           oh.make_tensor_value_info("state", F, [2, 1, hidden]),
                           oh.make_tensor_value_info("sr", onnx.TensorProto.INT64, [])],
                          [oh.make_tensor_value_info("output", F, [1, 1]),
                           oh.make_tensor_value_info("stateN", F, [2, 1, hidden])])
    rng = np.random.default_rng(8)
    feeds = {"input": rng.standard_normal((1, 512)).astype(np.float32),
             "state": np.zeros((2, 1, hidden), np.float32), "sr": np.array(16000, np.int64)}
    return oh.make_model(graph, opset_imports=OPSET, ir_version=10), feeds


SMALL_MODELS: dict[str, Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]] | None]] = {
    "CNN (ResNet-18)": cnn,
    "transformer encoder": transformer_encoder,
    "LSTM": lstm,
    "torch TransformerEncoder": torch_transformer_encoder,
    "torch LSTM": torch_lstm,
    "If branches (silero-like)": branch_weights_model,
}
