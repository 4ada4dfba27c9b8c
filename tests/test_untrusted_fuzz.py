"""Damaged real models through ``load_model``, ``to_python`` and ``eager.run``: each ends in
a result or a DslError (a located report), never another exception.

Seeded, so a failure reproduces: a few hundred truncations, bit flips and byte overwrites
of ONNX backend models (a PyTorch-exported convolution with its weights, a sequence
model, a Loop).  The Loop limit is lowered for the run (a flipped trip count would
otherwise run a million iterations before the default limit stops it); that lowering
is itself the documented override at work.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import converter
import eager
from dsl import raised_limits
from dsl.errors import DslError
from tests.proto_edits import node_case_models

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
_FILE_MODELS = ["pytorch-converted/test_Conv2d", "simple/test_sequence_model1", "pytorch-operator/test_operator_params"]
DAMAGED_PER_MODEL = 70


def _file_model(name: str) -> tuple[bytes, list[object]]:
    folder = DATA / name
    inputs: list[object] = []
    data_set = folder / "test_data_set_0"
    for index in range(len(list(data_set.glob("input_*.pb")))):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((data_set / f"input_{index}.pb").read_bytes())
        inputs.append(numpy_helper.to_array(tensor))
    return (folder / "model.onnx").read_bytes(), inputs


def _models() -> dict[str, tuple[bytes, list[object]]]:
    models = {name: _file_model(name) for name in _FILE_MODELS}
    loop = node_case_models()["test_loop11"]
    models["test_loop11"] = (loop.model.SerializeToString(), list(loop.data_sets[0][0]))
    return models


MODELS = _models()


def damaged(payload: bytes, rng: random.Random) -> bytes:
    """A truncation, a few bit flips, or a few overwritten bytes of ``payload``."""
    kind = rng.randrange(3)
    if kind == 0:
        return payload[: rng.randrange(len(payload))]
    changed = bytearray(payload)
    for _ in range(rng.randrange(1, 5)):
        position = rng.randrange(len(changed))
        if kind == 1:
            changed[position] ^= 1 << rng.randrange(8)
        else:
            changed[position] = rng.randrange(256)
    return bytes(changed)


def _outcome(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except DslError as error:
        assert str(error).startswith(("error: ", os.sep)) or ": error: " in str(error), str(error)
        return type(error).__name__
    return "result"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_damaged_models_end_in_a_result_or_a_dsl_error(name: str, tmp_path: Path) -> None:
    payload, inputs = MODELS[name]
    rng = random.Random(f"issue-18/{name}")
    target = os.fspath(tmp_path / "damaged.onnx")
    outcomes: dict[str, int] = {}
    with raised_limits(loop_iterations=1000):
        for _ in range(DAMAGED_PER_MODEL):
            with open(target, "wb") as stream:
                stream.write(damaged(payload, rng))
            for outcome in (
                _outcome(lambda: converter.to_python(converter.load_model(target))),
                _outcome(lambda: eager.run(target, [np.copy(a) for a in inputs])),  # type: ignore[call-overload]
            ):
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # The damage is real: some copies fail, and some still convert or run.
    assert "result" in outcomes and len(outcomes) > 1, outcomes
