"""Every ONNX backend node case with tensor inputs and outputs, through ``converter.to_torch``.

Each case's model is converted whole (single-node cases and the expanded,
function-body ones alike) and run in ``eval()`` on the case's inputs; where
onnxruntime reproduces the case's expected outputs, the module must too, at the case's
own rtol/atol.  The kernels themselves are tested one by one in
``tests/test_torch_kernels*.py``; this is the builder end to end: attribute passing,
folded constants, tuple outputs, the eager fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import converter
from tests.roundtrip import output_oracle
from tests.test_backend_node_eager import RANDOM_CASES, _is_tensor_io, all_cases, to_array

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# case name -> why the module cannot reproduce it (goal: empty).
EXCLUDED: dict[str, str] = {}
# Cases whose expected output is one draw of a random generator: no backend reproduces it.
RANDOM = RANDOM_CASES | {"test_training_dropout", "test_training_dropout_mask", "test_training_dropout_default",
                         "test_training_dropout_default_mask"}


def _cases() -> list[Any]:
    return [case for case in all_cases() if _is_tensor_io(case.model)]


def _arrays(case: Any) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    # (cases hold some values as TensorProtos: the types numpy lacks, read with ml_dtypes)
    return [([to_array(v) for v in inputs], [to_array(v) for v in outputs]) for inputs, outputs in case.data_sets or []]


def _close(expected: list[np.ndarray], got: list[Any], rtol: float, atol: float) -> None:
    assert len(expected) == len(got)
    for want, have in zip(expected, got):
        have = np.asarray(have)
        assert have.shape == want.shape, f"shape {have.shape} vs {want.shape}"
        if want.dtype.kind in "OSU":
            assert have.tolist() == want.tolist()
        elif want.dtype.kind in "biu":
            np.testing.assert_array_equal(have, want)
        else:
            if want.dtype.itemsize == 2:  # float16/bfloat16: torch rounds each step, onnxruntime once at the end
                rtol = max(rtol, 2 * (2.0**-10 if want.dtype == np.float16 else 2.0**-7))
            np.testing.assert_allclose(have.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def _to_torch(value: np.ndarray) -> Any:
    from eager.values import numpy_to_torch

    value = np.asarray(value)  # (cases hold some 0-d inputs as numpy scalars)
    return numpy_to_torch(value if value.flags.c_contiguous else value.copy(order="C"))


def _module_outputs(module: Any, inputs: list[np.ndarray]) -> list[Any]:
    from eager.values import torch_to_numpy

    with torch.no_grad():
        result = module(*(_to_torch(value) for value in inputs))
    results = list(result) if isinstance(result, tuple) else [result]
    return [torch_to_numpy(value) if isinstance(value, torch.Tensor) else value for value in results]


def _param(case: Any) -> Any:
    if case.name in EXCLUDED:
        return pytest.param(case, id=case.name, marks=pytest.mark.xfail(reason=EXCLUDED[case.name], strict=True))
    return pytest.param(case, id=case.name)


@pytest.mark.parametrize("case", [_param(case) for case in _cases()])
def test_node_case_through_the_module(case: Any) -> None:
    if case.name in RANDOM:
        pytest.skip("the expected output is one draw of a random generator")
    if not _arrays(case):
        pytest.skip("the case has no data set")
    # Two oracles: the case's expected outputs (the ONNX spec), and onnxruntime's outputs
    # where its kernel differs from them (eval() reproduces either); a case onnxruntime
    # cannot run is a skip that says so.
    oracles, reason = output_oracle(case.model, _arrays(case), case.rtol, case.atol)
    if oracles is None and "No corresponding Numpy type" in reason:
        # onnxruntime ran the case; its numpy bridge cannot hand over a bfloat16/float8
        # output: the expected outputs (the spec) are the one oracle left.
        oracles = [expected for _, expected in _arrays(case)]
    if oracles is None:
        pytest.skip(reason)
    module = converter.to_torch(case.model).eval()
    transform = any(node.op_type in ("DFT", "STFT") for node in case.model.graph.node)
    for (inputs, expected), from_onnxruntime in zip(_arrays(case), oracles):
        got = _module_outputs(module, inputs)
        atol = case.atol
        if transform:  # a Fourier transform spreads rounding over every output: absolute error
            atol = max(atol, 4 * float(np.finfo(np.float32).eps) * max(float(np.abs(e).max()) for e in expected))
        if from_onnxruntime is not expected and not _agrees(expected, got, case.rtol, atol):
            expected = from_onnxruntime
        _close(expected, got, case.rtol, atol)


def _agrees(expected: list[np.ndarray], got: list[Any], rtol: float, atol: float) -> bool:
    try:
        _close(expected, got, rtol, atol)
    except AssertionError:
        return False
    return True
