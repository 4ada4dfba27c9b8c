"""Every ONNX backend node test case: model -> Python -> @script -> model.

Each case must come back isomorphic to the original (converter.compare), and where
onnxruntime runs the original to the case's expected outputs, the rebuilt model must
run to them too, within the case's tolerances.  Exclusions are listed with their reason
and marked strict xfail, so one that starts to pass is noticed.
"""

from __future__ import annotations

import pytest

from converter.compare import first_difference
from tests.proto_edits import node_case_models
from tests.roundtrip import assert_outputs_close, round_trip, run

pytestmark = pytest.mark.slow

# name -> why the round trip cannot be exact.
EXCLUDED: dict[str, str] = {}

_CASES = node_case_models()


def _original_runs(case) -> bool:
    """onnxruntime loads the original and reproduces the expected outputs."""
    inputs, expected = case.data_sets[0]
    try:
        got = run(case.model, list(inputs))
        assert_outputs_close(list(expected), got, case.rtol, case.atol)
    except Exception:  # any failure means onnxruntime cannot run this case
        return False
    return True


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
    if _original_runs(case):
        inputs, expected = case.data_sets[0]
        assert_outputs_close(list(expected), run(rebuilt, list(inputs)), case.rtol, case.atol)
