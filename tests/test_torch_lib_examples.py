"""The candidate example sets ``bench/torch_lib_sample.py`` tries, and its referee.

The candidates are read from a signature alone (``bench/torch_lib_examples.py``), so they
are tested here on plain Python functions shaped like torch_lib's, against independent
oracles: torch's own functional ops (a candidate that follows a convention is a call torch
accepts), numpy's einsum and matmul, onnx's element type table.  The referee is tested on
a callable that accepts one layout, and on onnxscript's real torch_lib where it is
installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

from bench.torch_lib_examples import (
    Candidate,
    candidates_for,
    einsum_equation,
    examples_for,
    torch_number_parameters,
)
from bench.torch_lib_sample import choose_example

# Plain functions with torch_lib's signatures (string annotations, schema docstrings).

def aten_conv2d(input: TFloat, weight: TFloat, bias: Optional[TFloat] = None,
                stride: Sequence[int] = (1, 1)) -> TFloat:
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1) -> Tensor"""


def aten_avg_pool3d(self: TFloat, kernel_size: Sequence[int], stride: Sequence[int] = ()) -> TFloat:
    """avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[]) -> Tensor"""


def aten_upsample_bilinear2d(self: TReal, output_size: INT64, align_corners: bool) -> TReal:
    """upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners) -> Tensor"""


def aten_einsum(equation: str, tensors: Sequence[TReal], path: Optional[int] = None) -> TReal:
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor"""


def aten_arange_start_step(start: TReal, end: TReal, dtype: int = -1) -> TensorType:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None) -> Tensor"""


def aten_repeat(self: TTensor, repeats: Sequence[TInt]) -> TTensor:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""


def quantized_decomposed_dequantize_per_channel(
        input: TensorType, scales: TensorType, zero_points: Optional[TensorType],
        axis: int, quant_min: int, quant_max: int, dtype: int) -> TensorType:
    """Per-channel dequantization (no schema line, as in torch_lib)."""


def torchvision_roi_align(input, rois, spatial_scale: float, pooled_height: int, pooled_width: int):
    """torchvision::roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> Tensor"""


def torchvision_nms(boxes: FLOAT, scores: FLOAT, iou_threshold: float) -> INT64:
    """nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor"""


def _by_label(function: Any, is_complex: bool = False) -> dict[str, dict[str, Any]]:
    candidates = candidates_for(function, is_complex)
    assert candidates is not None
    return {candidate.label: dict(candidate.arguments) for candidate in candidates}


# ------------------------------------------------------------------ the candidate lists

def test_first_candidate_is_the_old_rule_every_tensor_three_by_three():
    candidates = candidates_for(aten_conv2d)
    assert candidates is not None and candidates[0].label == "old rule"
    first = dict(candidates[0].arguments)
    assert [name for name, _ in candidates[0].arguments] == ["input", "weight"]  # required ones only
    assert first["input"].shape == first["weight"].shape == (3, 3) and first["input"].dtype == np.float32
    old = dict(examples_for(aten_conv2d) or [])
    assert all(np.array_equal(first[name], old[name]) for name in old)


def test_the_rank_a_suffix_names_is_tried_first_then_ranks_two_to_five():
    assert [c.label for c in candidates_for(aten_conv2d) or []] == ["old rule", "rank 4", "rank 2", "rank 3", "rank 5"]
    assert [c.label for c in candidates_for(aten_avg_pool3d) or []] == [
        "old rule", "rank 5", "rank 2", "rank 3", "rank 4"]
    assert [c.label for c in candidates_for(aten_repeat) or []] == ["old rule", "rank 2", "rank 3", "rank 4", "rank 5"]


def test_variadic_functions_have_no_candidates():
    def aten_cat(*tensors: TTensor) -> TTensor: ...

    assert candidates_for(aten_cat) is None


@pytest.mark.torch
def test_conventions_give_calls_torch_accepts_where_the_old_rule_does_not():
    torch = pytest.importorskip("torch", reason="torch (the oracle of a valid call) is an optional extra")
    functional = torch.nn.functional
    conv = _by_label(aten_conv2d)
    assert functional.conv2d(torch.from_numpy(conv["rank 4"]["input"]), torch.from_numpy(conv["rank 4"]["weight"])).ndim == 4
    with pytest.raises(RuntimeError):
        functional.conv2d(torch.from_numpy(conv["old rule"]["input"]), torch.from_numpy(conv["old rule"]["weight"]))
    pool = _by_label(aten_avg_pool3d)["rank 5"]
    assert functional.avg_pool3d(torch.from_numpy(pool["self"]), pool["kernel_size"]).shape == (3, 3, 1, 1, 1)  # stride = kernel
    upsample = _by_label(aten_upsample_bilinear2d)["rank 4"]
    resized = functional.interpolate(torch.from_numpy(upsample["self"]), size=[int(s) for s in upsample["output_size"]],
                                     mode="bilinear", align_corners=upsample["align_corners"])
    assert resized.shape[2:] == tuple(upsample["output_size"])
    repeat = _by_label(aten_repeat)["rank 3"]
    assert torch.from_numpy(repeat["self"]).repeat(*repeat["repeats"]).ndim == 3


def test_einsum_equation_fits_the_operands_numpy_agrees_with_a_matmul_chain():
    for label, arguments in _by_label(aten_einsum).items():
        if label == "old rule":
            continue
        first, second = arguments["tensors"]
        result = np.einsum(arguments["equation"], first, second)
        np.testing.assert_allclose(result, np.matmul(first, second), rtol=1e-5)
    three = [np.random.default_rng(k).random((2, 3, 3)) for k in range(3)]
    np.testing.assert_allclose(np.einsum(einsum_equation(3, 3), *three), three[0] @ three[1] @ three[2])


def test_quantized_data_is_eight_bit_and_dtype_is_its_onnx_number():
    candidates = _by_label(quantized_decomposed_dequantize_per_channel)
    assert list(candidates)[1:3] == ["rank 2 int8", "rank 2 uint8"]
    for label, integer_type in (("rank 3 int8", np.int8), ("rank 3 uint8", np.uint8)):
        arguments = candidates[label]
        assert arguments["input"].dtype == integer_type and arguments["input"].shape == (3, 3, 3)
        assert onnx.helper.tensor_dtype_to_np_dtype(arguments["dtype"]) == integer_type
        assert (arguments["quant_min"], arguments["quant_max"]) == ((-128, 127) if integer_type == np.int8 else (0, 255))
        assert arguments["scales"].shape == (3,) and arguments["scales"].dtype == np.float32  # one per channel (axis 1)
        assert arguments["zero_points"] is None  # optional: left out


def test_complex_overloads_end_in_real_and_imaginary():
    candidates = _by_label(aten_conv2d, is_complex=True)
    assert candidates["rank 4"]["input"].shape == (3, 3, 3, 3, 2)
    assert candidates["old rule"]["input"].shape == (3, 3)  # the old rule reads the _complex suffix only


def test_boxes_carry_a_batch_index_in_roi_functions_only():
    roi = _by_label(torchvision_roi_align)["rank 4"]
    assert roi["input"].shape == (3, 3, 3, 3) and roi["rois"].shape == (3, 5)
    assert (roi["pooled_height"], roi["pooled_width"]) == (1, 1)  # ints stay Python ints
    nms = _by_label(torchvision_nms)["rank 2"]
    assert nms["boxes"].shape == (3, 4) and nms["scores"].shape == (3,)


def test_torch_schema_numbers_become_rank_zero_tensors_and_int_lists():
    assert torch_number_parameters(aten_arange_start_step) == {"start", "end", "step", }
    assert torch_number_parameters(aten_conv2d) == {"stride"}
    assert torch_number_parameters(quantized_decomposed_dequantize_per_channel) == frozenset()  # no schema line

    def aten_permute(self: TTensor, dims: Sequence[int]) -> TTensor:
        """permute(Tensor(a) self, int[] dims=[0, 1], float? scale=None) -> Tensor(a)"""

    assert torch_number_parameters(aten_permute) == {"dims", "scale"}  # commas inside brackets kept
    arange = _by_label(aten_arange_start_step)["rank 3"]
    assert arange["start"].shape == arange["end"].shape == () and isinstance(arange["start"], np.ndarray)
    assert len(np.arange(arange["start"], arange["end"] + 1)) >= 1
    repeats = _by_label(aten_repeat)["rank 4"]["repeats"]
    assert len(repeats) == 4 and all(type(item) is int and item >= 1 for item in repeats)


# ------------------------------------------------------------------ the referee

def _rank_four_only(*arguments: Any) -> None:
    if any(isinstance(item, np.ndarray) and item.ndim != 4 for item in arguments):
        raise ValueError("this referee runs rank-4 inputs only")


def test_referee_picks_the_first_candidate_it_runs():
    candidates = candidates_for(aten_conv2d) or []
    choice = choose_example(_rank_four_only, candidates, first_only=False)
    assert (choice.rule, choice.referee_runs) == ("rank 4", True)
    assert dict(choice.arguments)["input"].shape == (3, 3, 3, 3)


def test_referee_keeps_the_old_rule_when_nothing_runs_or_when_told_to():
    candidates = [candidate for candidate in candidates_for(aten_conv2d) or [] if candidate.label != "rank 4"]
    assert choose_example(_rank_four_only, candidates, first_only=False).rule == "old rule"
    assert not choose_example(_rank_four_only, candidates, first_only=False).referee_runs
    everything = candidates_for(aten_conv2d) or []
    assert choose_example(lambda *_: None, everything, first_only=True).rule == "old rule"
    only_first = choose_example(_rank_four_only, everything, first_only=True)
    assert (only_first.rule, only_first.referee_runs) == ("old rule", False)


def test_referee_gets_copies_so_a_candidate_it_writes_into_is_left_unchanged():
    original = np.ones((3, 3, 3, 3), np.float32)

    def writes_into(*arguments: Any) -> None:
        arguments[0][...] = 0

    choice = choose_example(writes_into, [Candidate("rank 4", [("input", original)])], first_only=False)
    assert choice.referee_runs and np.all(dict(choice.arguments)["input"] == 1)


def test_onnxscript_eager_evaluator_referees_torch_lib_conv2d():
    pytest.importorskip("onnxscript", reason="onnxscript (the referee and the functions measured) is not installed")
    from onnxscript.function_libs.torch_lib.ops import core

    candidates = candidates_for(core.aten_conv2d.func) or []
    assert choose_example(core.aten_conv2d, candidates, first_only=False).rule == "rank 4"
    assert not choose_example(core.aten_conv2d, candidates, first_only=True).referee_runs


def test_bench_measures_torch_lib_conv2d_on_the_refereed_example_and_the_old_rule():
    pytest.importorskip("onnxscript", reason="onnxscript (the referee and the functions measured) is not installed")
    from onnxscript.function_libs.torch_lib.ops import core

    from bench.torch_lib_sample import Translator, measure

    translator = Translator()
    new = measure(translator, core.__name__, "aten_conv2d", core.aten_conv2d)
    assert (new.example_rule, new.onnxscript_eager_ok, new.onnxscript_ok) == ("rank 4", True, True)
    assert new.compiles and new.agrees, new.compile_error or new.agree_error  # onnxruntime vs our eager run
    old = measure(translator, core.__name__, "aten_conv2d", core.aten_conv2d, first_only=True)
    assert (old.example_rule, old.onnxscript_eager_ok, old.compiles) == ("old rule", False, False)
    assert "Conv" in old.compile_error and "rank 2" in old.compile_error  # a wrong call, refused while compiling
