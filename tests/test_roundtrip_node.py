"""Every ONNX backend node test case: model -> Python -> @script -> model.

Each case must come back isomorphic to the original (converter.compare), and where
onnxruntime runs the original to the case's expected outputs, the rebuilt model must
run to them too, within the case's tolerances (integers and bools exactly); where
onnxruntime runs the original to other values (its kernel differs from the spec), the
rebuilt model must run to onnxruntime's outputs of the original.  A case whose original
onnxruntime cannot run (or runs to random draws) is compared by structure only and then
*skipped* with that reason, so pytest's summary counts the downgrades.  Exclusions are listed with their reason and marked strict xfail, so one
that starts to pass is noticed.
"""

from __future__ import annotations

import pytest

from converter.compare import first_difference
from tests.proto_edits import node_case_models
from tests.roundtrip import assert_outputs_close, output_oracle, round_trip, run

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
    source, rebuilt = round_trip(case.model, str(tmp_path), "case")
    difference = first_difference(case.model, rebuilt, check_metadata=True)
    assert difference is None, f"{difference}\n--- generated source ---\n{source}"
    data_sets = case.data_sets[:1]
    oracles, reason = output_oracle(case.model, data_sets, case.rtol, case.atol)
    if oracles is None:
        pytest.skip(f"structure compared, outputs not: {reason}")
    for (inputs, _), expected in zip(data_sets, oracles):
        assert_outputs_close(expected, run(rebuilt, list(inputs)), case.rtol, case.atol)
