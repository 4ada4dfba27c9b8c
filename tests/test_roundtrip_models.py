"""The ONNX backend data models (light, simple, pytorch-converted, pytorch-operator):
model -> Python -> @script -> model, and the generated Python run eagerly.

Each must come back isomorphic to the original; where onnxruntime runs the original to
the stored expected outputs (``test_data_set_*``; for the light models the expected
``*_output_0.pb`` on the runner's dummy inputs), the rebuilt model must run to them too
(integers and bools exactly), or to onnxruntime's outputs of the original where those
differ from the stored ones.  A model whose original onnxruntime cannot run is compared
by structure only and then skipped with that reason.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

from converter.compare import first_difference
from tests.roundtrip import assert_outputs_close, output_oracle, round_trip_function, run, run_eagerly

pytestmark = pytest.mark.slow

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
# The runner's tolerances for the light models (onnx/backend/test/case/model/__init__.py).
_LIGHT_RTOL = {"densenet121": 2e-3}

# relative model path -> why the round trip cannot be exact.
EXCLUDED: dict[str, str] = {}


def _model_paths() -> list[str]:
    paths = sorted(glob.glob(os.path.join(DATA, "light", "*.onnx")))
    for suite in ("simple", "pytorch-converted", "pytorch-operator"):
        paths += sorted(glob.glob(os.path.join(DATA, suite, "*", "model.onnx")))
    return [p for p in paths if not p.endswith("_output_0.pb")]


def _read(path: str, type_proto: onnx.TypeProto) -> Any:
    """A stored input/output, read as the proto its type says (tensor, sequence, optional)."""
    with open(path, "rb") as stream:
        payload = stream.read()
    which = type_proto.WhichOneof("value")
    if which == "sequence_type":
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(payload)
        return numpy_helper.to_list(sequence)
    if which == "optional_type":
        optional = onnx.OptionalProto()
        optional.ParseFromString(payload)
        return numpy_helper.to_optional(optional)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(payload)
    return numpy_helper.to_array(tensor)


def _data_sets(path: str, model: onnx.ModelProto) -> tuple[list[tuple[list[Any], list[Any]]], float, float]:
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    if os.path.basename(path) != "model.onnx":  # a light model: the runner's dummy inputs
        name = os.path.basename(path)[len("light_"):-len(".onnx")]
        feeds = [Runner.generate_dummy_data(v, seed=0, name=name, random=False) for v in inputs]
        expected = [_read(path[: -len(".onnx")] + "_output_0.pb", model.graph.output[0].type)]
        return [(feeds, expected)], _LIGHT_RTOL.get(name, 1e-3), 1e-7
    sets = []
    for folder in sorted(glob.glob(os.path.join(os.path.dirname(path), "test_data_set_*"))):
        feeds = [_read(p, v.type) for p, v in zip(sorted(glob.glob(os.path.join(folder, "input_*.pb"))), inputs)]
        outputs = sorted(glob.glob(os.path.join(folder, "output_*.pb")))
        expected = [_read(p, v.type) for p, v in zip(outputs, model.graph.output)]
        sets.append((feeds, expected))
    return sets, 1e-3, 1e-7


def _param(path: str) -> Any:
    key = os.path.relpath(path, DATA)
    if key in EXCLUDED:
        return pytest.param(path, id=key, marks=pytest.mark.xfail(reason=EXCLUDED[key], strict=True))
    return pytest.param(path, id=key)


@pytest.mark.parametrize("path", [_param(p) for p in _model_paths()])
def test_data_model_round_trips(path: str, tmp_path) -> None:
    original = onnx.load(path)
    source, function, rebuilt = round_trip_function(original, str(tmp_path))
    difference = first_difference(original, rebuilt, check_metadata=True)
    assert difference is None, f"{difference}\n--- generated source (start) ---\n{source[:3000]}"
    data_sets, rtol, atol = _data_sets(path, original)
    oracles, reason = output_oracle(original, data_sets, rtol, atol)
    if oracles is None:
        pytest.skip(f"structure compared, outputs not: {reason}")
    for (feeds, specified), expected in zip(data_sets, oracles):
        assert_outputs_close(expected, run(rebuilt, feeds), rtol, atol)
        # The generated function run eagerly: the rebuilt model's outputs, or the stored ones
        # where onnxruntime's kernel departs from them (eager mode runs onnx.reference there).
        eager_outputs = run_eagerly(function, feeds)
        try:
            assert_outputs_close(expected, eager_outputs, rtol, atol)
        except AssertionError:
            assert_outputs_close(list(specified), eager_outputs, rtol, atol)
