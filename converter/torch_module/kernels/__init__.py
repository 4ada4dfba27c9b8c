"""ONNX operators as torch functions: the table the torch back end looks kernels up in.

Contract between this package and the module builder (``converter/torch_module``):

* ``lookup(domain, op_type, opset_version)`` returns the kernel for the newest entry
  whose ``since`` version is <= ``opset_version``, or ``None`` (the builder then runs the
  node through the eager back end, detached and non-differentiable).
* A kernel is a plain module-level function (so ``torch.fx`` prints it readably and it
  pickles), called as ``kernel(*inputs, **attributes)``:
  - ``inputs``: ``torch.Tensor``, or ``None`` for an omitted optional input (trailing
    omitted inputs are not passed). An integer input whose value the builder knows when
    converting (an initializer or Constant feeding Reshape's shape, Slice's starts, ...)
    may arrive as a Python ``int``/``tuple`` instead of a tensor: kernels accept both.
  - ``attributes``: only those present on the node, as Python values (int, float, str,
    lists of those, ``torch.Tensor`` for tensor attributes); the kernel's keyword
    defaults are the schema's defaults.
  - returns a ``torch.Tensor``, or a tuple with one entry per output the op can have
    when the op's newest schema allows more than one output (at every version, so
    MaxPool-1 returns ``(Y, Indices)`` too).
  - the ops in ``NEEDS_OUTPUT_COUNT`` (Split without sizes divides into as many parts as
    the node has outputs; LayerNormalization binding only Y runs fused) also take the
    keyword ``output_count=len(node outputs)``.
* ``arguments.torch_dtype`` / ``arguments.onnx_type`` map ONNX element types to torch
  dtypes and back; ``arguments.ints`` reads a shape-like argument.
* Kernels implement inference (``eval()``) semantics; the builder owns training mode
  (BatchNormalization batch statistics, Dropout) and control flow (If, Loop, Scan).

The table is written out literally below (no registration by import side effects).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from converter.torch_module.kernels import (
    attention,
    convolution,
    detection,
    elementwise,
    generators,
    indexing,
    linear,
    losses,
    normalization,
    pooling,
    quantization,
    recurrent,
    reductions,
    resize,
    sequence_models,
    shapes,
    spatial,
)

Kernel = Callable[..., object]

# (domain, op_type) -> ((since_version, kernel), ...) in ascending since_version.
KERNELS: Mapping[tuple[str, str], tuple[tuple[int, Kernel], ...]] = {
    ("", "Abs"): ((6, elementwise.abs),),
    ("", "Acos"): ((7, elementwise.acos),),
    ("", "Acosh"): ((9, elementwise.acosh),),
    ("", "Add"): ((6, elementwise.add),),
    ("", "AffineGrid"): ((20, spatial.affine_grid),),
    ("", "And"): ((1, elementwise.logical_and),),
    ("", "ArgMax"): ((1, reductions.arg_max),),
    ("", "ArgMin"): ((1, reductions.arg_min),),
    ("", "Asin"): ((7, elementwise.asin),),
    ("", "Asinh"): ((9, elementwise.asinh),),
    ("", "Atan"): ((7, elementwise.atan),),
    ("", "Atanh"): ((9, elementwise.atanh),),
    ("", "Attention"): ((23, attention.attention),),
    ("", "AveragePool"): ((1, pooling.average_pool),),
    ("", "BatchNormalization"): ((6, normalization.batch_normalization_6), (14, normalization.batch_normalization)),
    ("", "Bernoulli"): ((15, generators.bernoulli),),
    ("", "BitCast"): ((26, spatial.bit_cast),),
    ("", "BitShift"): ((11, elementwise.bit_shift),),
    ("", "BitwiseAnd"): ((18, elementwise.bitwise_and),),
    ("", "BitwiseNot"): ((18, elementwise.bitwise_not),),
    ("", "BitwiseOr"): ((18, elementwise.bitwise_or),),
    ("", "BitwiseXor"): ((18, elementwise.bitwise_xor),),
    ("", "BlackmanWindow"): ((17, generators.blackman_window),),
    ("", "Cast"): ((6, elementwise.cast),),
    ("", "CastLike"): ((15, elementwise.cast_like),),
    ("", "CausalConvWithState"): ((27, sequence_models.causal_conv_with_state),),
    ("", "Ceil"): ((6, elementwise.ceil),),
    ("", "Celu"): ((12, elementwise.celu),),
    ("", "CenterCropPad"): ((18, shapes.center_crop_pad),),
    ("", "Clip"): ((6, elementwise.clip),),
    ("", "Col2Im"): ((18, spatial.col2im),),
    ("", "Compress"): ((9, indexing.compress),),
    ("", "Concat"): ((1, shapes.concat),),
    ("", "Constant"): ((1, generators.constant),),
    ("", "ConstantOfShape"): ((9, generators.constant_of_shape),),
    ("", "Conv"): ((1, convolution.conv),),
    ("", "ConvInteger"): ((10, convolution.conv_integer),),
    ("", "ConvTranspose"): ((1, convolution.conv_transpose),),
    ("", "Cos"): ((7, elementwise.cos),),
    ("", "Cosh"): ((9, elementwise.cosh),),
    ("", "CumProd"): ((26, reductions.cum_prod),),
    ("", "CumSum"): ((11, reductions.cum_sum),),
    ("", "DFT"): ((17, spatial.dft_17), (20, spatial.dft)),
    ("", "DepthToSpace"): ((1, shapes.depth_to_space),),
    ("", "DequantizeLinear"): ((10, quantization.dequantize_linear),),
    ("", "Det"): ((11, linear.det),),
    ("", "Div"): ((6, elementwise.div),),
    ("", "Dropout"): ((1, generators.dropout),),
    ("", "DynamicQuantizeLinear"): ((11, quantization.dynamic_quantize_linear),),
    ("", "Einsum"): ((12, linear.einsum),),
    ("", "Elu"): ((6, elementwise.elu),),
    ("", "Equal"): ((1, elementwise.equal),),
    ("", "Erf"): ((9, elementwise.erf),),
    ("", "Exp"): ((6, elementwise.exp),),
    ("", "Expand"): ((8, shapes.expand),),
    ("", "EyeLike"): ((9, generators.eye_like),),
    ("", "Flatten"): ((1, shapes.flatten),),
    ("", "Floor"): ((6, elementwise.floor),),
    ("", "GRU"): ((7, recurrent.gru),),
    ("", "Gather"): ((1, indexing.gather),),
    ("", "GatherElements"): ((11, indexing.gather_elements),),
    ("", "GatherND"): ((11, indexing.gather_nd),),
    ("", "Gelu"): ((20, elementwise.gelu),),
    ("", "Gemm"): ((6, linear.gemm),),
    ("", "GlobalAveragePool"): ((1, pooling.global_average_pool),),
    ("", "GlobalLpPool"): ((2, pooling.global_lp_pool),),
    ("", "GlobalMaxPool"): ((1, pooling.global_max_pool),),
    ("", "Greater"): ((1, elementwise.greater),),
    ("", "GreaterOrEqual"): ((12, elementwise.greater_or_equal),),
    ("", "GridSample"): ((16, spatial.grid_sample),),
    ("", "GroupNormalization"): ((18, normalization.group_normalization_18), (21, normalization.group_normalization),),
    ("", "HammingWindow"): ((17, generators.hamming_window),),
    ("", "HannWindow"): ((17, generators.hann_window),),
    ("", "HardSigmoid"): ((6, elementwise.hard_sigmoid),),
    ("", "HardSwish"): ((14, elementwise.hard_swish),),
    ("", "Hardmax"): ((1, normalization.hardmax_1), (13, normalization.hardmax),),
    ("", "Identity"): ((1, elementwise.identity),),
    ("", "InstanceNormalization"): ((6, normalization.instance_normalization),),
    ("", "IsInf"): ((10, elementwise.is_inf),),
    ("", "IsNaN"): ((9, elementwise.is_nan),),
    ("", "LRN"): ((1, pooling.lrn),),
    ("", "LSTM"): ((7, recurrent.lstm),),
    ("", "LayerNormalization"): ((17, normalization.layer_normalization),),
    ("", "LeakyRelu"): ((6, elementwise.leaky_relu),),
    ("", "Less"): ((1, elementwise.less),),
    ("", "LessOrEqual"): ((12, elementwise.less_or_equal),),
    ("", "LinearAttention"): ((27, sequence_models.linear_attention),),
    ("", "Log"): ((6, elementwise.log),),
    ("", "LogSoftmax"): ((1, normalization.log_softmax_1), (13, normalization.log_softmax),),
    ("", "LpNormalization"): ((1, normalization.lp_normalization),),
    ("", "LpPool"): ((2, pooling.lp_pool),),
    ("", "MatMul"): ((1, linear.matmul),),
    ("", "MatMulInteger"): ((10, linear.matmul_integer),),
    ("", "Max"): ((6, elementwise.max),),
    ("", "MaxPool"): ((1, pooling.max_pool),),
    ("", "MaxUnpool"): ((9, pooling.max_unpool),),
    ("", "Mean"): ((6, elementwise.mean),),
    ("", "MeanVarianceNormalization"): ((9, normalization.mean_variance_normalization),),
    ("", "Min"): ((6, elementwise.min),),
    ("", "Mish"): ((18, elementwise.mish),),
    ("", "Mod"): ((10, elementwise.mod),),
    ("", "Mul"): ((6, elementwise.mul),),
    ("", "Neg"): ((6, elementwise.neg),),
    ("", "NegativeLogLikelihoodLoss"): ((12, losses.negative_log_likelihood_loss),),
    ("", "NonMaxSuppression"): ((10, detection.non_max_suppression),),
    ("", "NonZero"): ((9, indexing.non_zero),),
    ("", "Not"): ((1, elementwise.logical_not),),
    ("", "OneHot"): ((9, indexing.one_hot),),
    ("", "OptionalGetElement"): ((18, sequence_models.optional_get_element),),
    ("", "OptionalHasElement"): ((18, sequence_models.optional_has_element),),
    ("", "Or"): ((1, elementwise.logical_or),),
    ("", "PRelu"): ((6, elementwise.prelu),),
    ("", "Pad"): ((2, shapes.pad),),
    ("", "Pow"): ((1, elementwise.pow),),
    ("", "QLinearConv"): ((10, quantization.qlinear_conv),),
    ("", "QLinearMatMul"): ((10, quantization.qlinear_matmul),),
    ("", "QuantizeLinear"): ((10, quantization.quantize_linear),),
    ("", "RMSNormalization"): ((23, normalization.rms_normalization),),
    ("", "RNN"): ((7, recurrent.rnn),),
    ("", "Range"): ((11, generators.range_),),
    ("", "Reciprocal"): ((6, elementwise.reciprocal),),
    ("", "ReduceL1"): ((1, reductions.reduce_l1),),
    ("", "ReduceL2"): ((1, reductions.reduce_l2),),
    ("", "ReduceLogSum"): ((1, reductions.reduce_log_sum),),
    ("", "ReduceLogSumExp"): ((1, reductions.reduce_log_sum_exp),),
    ("", "ReduceMax"): ((1, reductions.reduce_max),),
    ("", "ReduceMean"): ((1, reductions.reduce_mean),),
    ("", "ReduceMin"): ((1, reductions.reduce_min),),
    ("", "ReduceProd"): ((1, reductions.reduce_prod),),
    ("", "ReduceSum"): ((1, reductions.reduce_sum),),
    ("", "ReduceSumSquare"): ((1, reductions.reduce_sum_square),),
    ("", "Relu"): ((6, elementwise.relu),),
    ("", "Reshape"): ((5, shapes.reshape),),
    ("", "Resize"): ((10, resize.resize_10), (11, resize.resize)),
    ("", "ReverseSequence"): ((10, indexing.reverse_sequence),),
    ("", "RotaryEmbedding"): ((23, attention.rotary_embedding),),
    ("", "Round"): ((11, elementwise.round),),
    ("", "STFT"): ((17, spatial.stft),),
    ("", "Scatter"): ((9, indexing.scatter),),
    ("", "ScatterElements"): ((11, indexing.scatter_elements),),
    ("", "ScatterND"): ((11, indexing.scatter_nd),),
    ("", "Selu"): ((6, elementwise.selu),),
    ("", "Shape"): ((1, shapes.shape),),
    ("", "Shrink"): ((9, elementwise.shrink),),
    ("", "Sigmoid"): ((6, elementwise.sigmoid),),
    ("", "Sign"): ((9, elementwise.sign),),
    ("", "Sin"): ((7, elementwise.sin),),
    ("", "Sinh"): ((9, elementwise.sinh),),
    ("", "Size"): ((1, shapes.size),),
    ("", "Slice"): ((1, shapes.slice_),),
    ("", "Softmax"): ((1, normalization.softmax_1), (13, normalization.softmax),),
    ("", "SoftmaxCrossEntropyLoss"): ((12, losses.softmax_cross_entropy_loss),),
    ("", "Softplus"): ((1, elementwise.softplus),),
    ("", "Softsign"): ((1, elementwise.softsign),),
    ("", "SpaceToDepth"): ((1, shapes.space_to_depth),),
    ("", "Split"): ((2, shapes.split),),
    ("", "Sqrt"): ((6, elementwise.sqrt),),
    ("", "Squeeze"): ((1, shapes.squeeze),),
    ("", "Sub"): ((6, elementwise.sub),),
    ("", "Sum"): ((6, elementwise.sum),),
    ("", "SwiGLU"): ((28, attention.swiglu),),
    ("", "Swish"): ((24, elementwise.swish),),
    ("", "Tan"): ((7, elementwise.tan),),
    ("", "Tanh"): ((6, elementwise.tanh),),
    ("", "TensorScatter"): ((24, attention.tensor_scatter),),
    ("", "ThresholdedRelu"): ((10, elementwise.thresholded_relu),),
    ("", "Tile"): ((6, shapes.tile),),
    ("", "TopK"): ((1, indexing.top_k),),
    ("", "Transpose"): ((1, shapes.transpose),),
    ("", "Trilu"): ((14, shapes.trilu),),
    ("", "Unique"): ((11, indexing.unique),),
    ("", "Unsqueeze"): ((1, shapes.unsqueeze),),
    ("", "Upsample"): ((7, resize.upsample),),
    ("", "Where"): ((9, elementwise.where),),
    ("", "Xor"): ((1, elementwise.logical_xor),),
}


# Ops whose kernel needs the number of outputs the node binds (keyword ``output_count``).
NEEDS_OUTPUT_COUNT: frozenset[tuple[str, str]] = frozenset({("", "Split"), ("", "LayerNormalization")})


def lookup(domain: str, op_type: str, opset_version: int) -> Kernel | None:
    """The kernel computing ``op_type`` as it is defined at ``opset_version``, if any."""
    entries = KERNELS.get(("" if domain == "ai.onnx" else domain, op_type), ())
    chosen = None
    for since, kernel in entries:
        if since <= opset_version:
            chosen = kernel
    return chosen
