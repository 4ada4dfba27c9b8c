"""Where eager mode runs an op in ``onnx.reference`` although onnxruntime accepts it.

onnxruntime is the default because it is fast and is what most exported models run on.
For the few ops below, onnxruntime's result (seen with 1.31) differs from the ONNX
specification (as recorded in the ONNX backend test data), so a debugging session would
see numbers the spec does not give; these run in ``onnx.reference``, and
:func:`eager.last_backend` reports the reason.  Each rule was found by running every
ONNX backend node case (``tests/test_backend_node_eager.py``) through onnxruntime; a
release that fixes one still gets the spec's numbers, from onnx.reference.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx.helper

__all__ = ["reference_reason"]

Rule = Callable[[dict[str, object], int], bool]


def _always(attributes: dict[str, object], n_inputs: int) -> bool:
    return True


def _causal(attributes: dict[str, object], n_inputs: int) -> bool:
    return bool(attributes.get("is_causal", 0))


def _align_corners(attributes: dict[str, object], n_inputs: int) -> bool:
    return attributes.get("coordinate_transformation_mode") in ("align_corners", b"align_corners")


def _with_output_shape(attributes: dict[str, object], n_inputs: int) -> bool:
    return n_inputs >= 3


def _training_mode_given(attributes: dict[str, object], n_inputs: int) -> bool:
    return n_inputs >= 3


_RULES: dict[tuple[str, str], tuple[Rule, str]] = {
    ("", "DFT"): (_always, "onnxruntime's float32 DFT leaves errors near 1e-4 where the spec's result is 0"),
    ("", "STFT"): (_always, "onnxruntime's float32 STFT leaves errors near 1e-5 where the spec's result is 0"),
    ("", "Attention"): (_causal, "onnxruntime's causal Attention differs from the spec with a mask or fp16"),
    ("", "Resize"): (_align_corners, "onnxruntime's align_corners Resize differs from the spec when downsampling"),
    ("", "MaxUnpool"): (_with_output_shape, "onnxruntime places values differently when output_shape is given"),
    ("", "Dropout"): (
        _training_mode_given,
        "training-mode Dropout draws random masks; onnx.reference draws them as the ONNX spec's tests do",
    ),
}


def reference_reason(domain: str, op_type: str, attributes: list[onnx.AttributeProto], n_inputs: int) -> str:
    """Why this call should run in onnx.reference, or "" to use onnxruntime."""
    rule = _RULES.get((domain, op_type))
    if rule is None:
        return ""
    values = {a.name: onnx.helper.get_attribute_value(a) for a in attributes}
    return rule[1] if rule[0](values, n_inputs) else ""
