"""Every ONNX backend node test case: model -> Python -> @script -> model, and the
generated Python run eagerly.

Each case must come back isomorphic to the original (converter.compare), and where
onnxruntime runs the original to the case's expected outputs, the rebuilt model must
run to them too, within the case's tolerances (integers and bools exactly); where
onnxruntime runs the original to other values (its kernel differs from the spec), the
rebuilt model must run to onnxruntime's outputs of the original.  The generated
function, called eagerly on the same inputs, must give the rebuilt model's outputs, or
the spec's where onnxruntime's kernel departs from it (eager mode runs onnx.reference
there), within the case's tolerances widened to four units of a float16 output's last
place (eager mode rounds each op's result).  A case whose original
onnxruntime cannot run (or runs to random draws) is compared by structure only and then
*skipped* with that reason, so pytest's summary counts the downgrades.  Exclusions are listed with their reason and marked strict xfail, so one
that starts to pass is noticed.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import pytest

from converter.compare import first_difference
from tests.proto_edits import node_case_models
from tests.roundtrip import assert_outputs_close, output_oracle, round_trip_function, run, run_eagerly

pytestmark = pytest.mark.slow

# name -> why the round trip cannot be exact.
EXCLUDED: dict[str, str] = {}

_CASES = node_case_models()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(reason=EXCLUDED[name], strict=True)) if name in EXCLUDED else name
        for name in sorted(_CASES)
    ],
)
def test_node_case_round_trips(name: str, tmp_path) -> None:
    case = _CASES[name]
    source, function, rebuilt = round_trip_function(case.model, str(tmp_path), "case")
    difference = first_difference(case.model, rebuilt, check_metadata=True)
    assert difference is None, f"{difference}\n--- generated source ---\n{source}"
    data_sets = case.data_sets[:1]
    oracles, reason = output_oracle(case.model, data_sets, case.rtol, case.atol)
    if oracles is None:
        pytest.skip(f"structure compared, outputs not: {reason}")
    for (inputs, specified), expected in zip(data_sets, oracles):
        assert_outputs_close(expected, run(rebuilt, list(inputs)), case.rtol, case.atol)
        # The principle: the generated function run eagerly computes what its model computes
        # in onnxruntime, or, where onnxruntime's kernel departs from the spec (eager mode
        # runs onnx.reference there), the spec's outputs.
        eager_outputs = run_eagerly(function, list(inputs))
        rtol = _eager_rtol(expected, case.rtol)
        try:
            assert_outputs_close(expected, eager_outputs, rtol, case.atol)
        except AssertionError:
            assert_outputs_close(list(specified), eager_outputs, rtol, case.atol)


def _eager_rtol(outputs: list[Any], rtol: float) -> float:
    """``rtol``, or four units in the last place of the narrowest float output, if wider:
    eager mode rounds each op's result to it where the model may keep more precision
    between fused ops (an expanded fp16 attention differs by two units there)."""
    widest = rtol
    for output in outputs:
        dtype = getattr(output, "dtype", None)
        if dtype is not None and (dtype.kind == "f" or dtype.name == "bfloat16"):
            widest = max(widest, 4 * float(ml_dtypes.finfo(dtype).eps))
    return widest
