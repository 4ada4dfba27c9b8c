"""``dsl.initializers`` and ``dsl.load_weights``: weights named by their path, read
from an ``.npz`` or a torch state_dict without running code from the file."""

from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import dsl
from dsl import FLOAT, WeightsLoadError, script
from dsl import opset18 as op
from tests.helpers import check_script


@dataclass
class Block:
    w: object
    eps: float


def test_initializers_name_every_array_by_its_path() -> None:
    tree = {"layers": [{"wq": np.ones((2, 2), np.float32)}, Block(np.zeros(2, np.float32), 1e-5)],
            "ns": SimpleNamespace(scale=np.ones(3, np.float32)), "count": 2}
    named = dsl.initializers(tree)
    assert named["layers"][0]["wq"].name == "layers.0.wq"
    assert named["layers"][1].w.name == "layers.1.w" and named["layers"][1].eps == 1e-5
    assert named["ns"].scale.name == "ns.scale"
    assert named["count"] == 2
    np.testing.assert_array_equal(np.asarray(named["layers"][0]["wq"]), tree["layers"][0]["wq"])


def test_npz_weights_load_as_named_initializers_and_compile_once(tmp_path: Path) -> None:
    arrays = {"layers.0.w": np.arange(4, dtype=np.float32), "layers.1.w": np.full(4, 2.0, np.float32)}
    np.savez(tmp_path / "w.npz", **arrays)
    weights = dsl.load_weights(tmp_path / "w.npz")
    assert {name: w.name for name, w in weights.items()} == {name: name for name in arrays}
    layers = [weights[f"layers.{i}.w"] for i in range(2)]

    @script()
    def scaled(x: FLOAT[4]) -> FLOAT[4]:
        for w in layers:
            x = x * w + layers[0]
        return x

    x = np.ones(4, np.float32)
    expected = (x * arrays["layers.0.w"] + arrays["layers.0.w"]) * arrays["layers.1.w"] + arrays["layers.0.w"]
    check_script(scaled, [x], expected)
    assert sorted(i.name for i in scaled.to_model_proto().graph.initializer) == sorted(arrays)


def test_torch_state_dict_loads_without_torch_unpickling(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="writing a state_dict needs torch")
    module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    torch.save(module.state_dict(), tmp_path / "model.pt")
    weights = dsl.load_weights(tmp_path / "model.pt")
    state = module.state_dict()
    assert sorted(weights) == sorted(state)
    for name, value in state.items():
        assert weights[name].name == name
        np.testing.assert_array_equal(np.asarray(weights[name]), value.numpy())


class _Evil:
    def __reduce__(self) -> tuple:
        return (print, ("ran code from a weights file",))


def test_a_state_dict_naming_a_callable_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = io.BytesIO()
    pickle.dump({"w": _Evil()}, payload, protocol=2)
    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", payload.getvalue())
    with pytest.raises(WeightsLoadError, match=r"refers to .*print"):
        dsl.load_weights(path)
    assert "ran code" not in capsys.readouterr().out


def test_a_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.pkl"
    path.write_bytes(pickle.dumps({"w": np.ones(2)}))
    with pytest.raises(WeightsLoadError, match=r"neither an \.npz nor a torch"):
        dsl.load_weights(path)


def test_initializer_in_python_arithmetic_eagerly_and_compiled() -> None:
    weight = dsl.initializer(np.arange(3, dtype=np.float32), "w")
    np.testing.assert_array_equal(np.asarray(weight * 2.0 + 1.0), np.arange(3) * 2.0 + 1.0)

    @script()
    def doubled(x: FLOAT[3]) -> FLOAT[3]:
        return op.Add(weight * 2.0, x)

    check_script(doubled, [np.ones(3, np.float32)], np.arange(3, dtype=np.float32) * 2 + 1)
