"""The README's LLaMA-style decoder ("Writing a real model"), run as written there.

The code block is read from README.md and imported as a module, so the README cannot
drift from what works.  It is checked eagerly and exported (one model, dynamic batch,
sequence and cache length, run in onnxruntime) against the same decoder written here in
plain torch: a prefill of every length 1..33 and a cached decode step, batch 3.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest

import dsl

torch = pytest.importorskip("torch", reason="the reference decoder is written in plain torch")

README = Path(__file__).resolve().parent.parent / "README.md"
CFG = {"dim": 32, "heads": 4, "kv_heads": 2, "head_dim": 8, "hidden": 64, "vocab": 50, "theta": 10000.0}
LAYERS = 2
BATCH = 3


def readme_decoder_module(tmp_path: Path) -> ModuleType:
    """The first Python block of the README's "Writing a real model" section, imported."""
    text = README.read_text()
    section = text[text.index("## Writing a real model"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the section has no python block"
    path = tmp_path / "readme_decoder.py"
    path.write_text(code.group(1))
    spec = importlib.util.spec_from_file_location("readme_decoder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def random_weights(rng: np.random.Generator, layers: int) -> dict:
    dim, hidden, kv = CFG["dim"], CFG["hidden"], CFG["kv_heads"] * CFG["head_dim"]

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    return {
        "embed": w(CFG["vocab"], dim), "norm": 1 + w(dim), "lm_head": w(dim, CFG["vocab"]),
        "layers": [{"attn_norm": 1 + w(dim), "ffn_norm": 1 + w(dim), "wq": w(dim, dim), "wk": w(dim, kv),
                    "wv": w(dim, kv), "wo": w(dim, dim), "w1": w(dim, hidden), "w3": w(dim, hidden),
                    "w2": w(hidden, dim)} for _ in range(layers)],
    }


# ------------------------------------------------------------- the torch reference
def torch_decoder(arrays: dict, tokens: np.ndarray, past_k: np.ndarray, past_v: np.ndarray) -> list[np.ndarray]:
    t = {k: torch.from_numpy(v) for k, v in arrays.items() if k != "layers"}
    layers = [{k: torch.from_numpy(v) for k, v in layer.items()} for layer in arrays["layers"]]
    heads, kv_heads, head_dim = CFG["heads"], CFG["kv_heads"], CFG["head_dim"]
    ids = torch.from_numpy(tokens)
    batch, seq = ids.shape
    past = past_k.shape[3]

    def norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

    inv_freq = 1.0 / CFG["theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    positions = torch.arange(past, past + seq, dtype=torch.float32)
    angles = torch.outer(positions, inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos(), angles.sin()

    def rotate(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    allowed = torch.arange(past + seq)[None, :] <= torch.arange(past, past + seq)[:, None]
    h = t["embed"][ids]
    keys, values = [], []
    for index, layer in enumerate(layers):
        x = norm(h, layer["attn_norm"])
        q = (x @ layer["wq"]).view(batch, seq, heads, head_dim).transpose(1, 2)
        k = (x @ layer["wk"]).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
        v = (x @ layer["wv"]).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
        q, k = rotate(q), rotate(k)
        k = torch.cat([torch.from_numpy(past_k[index]), k], dim=2)
        v = torch.cat([torch.from_numpy(past_v[index]), v], dim=2)
        keys.append(k)
        values.append(v)
        k_all = k.repeat_interleave(heads // kv_heads, dim=1)
        v_all = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = (q @ k_all.transpose(-1, -2)) / head_dim**0.5
        probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        out = (probs @ v_all).transpose(1, 2).reshape(batch, seq, heads * head_dim)
        h = h + out @ layer["wo"]
        x = norm(h, layer["ffn_norm"])
        h = h + (torch.nn.functional.silu(x @ layer["w1"]) * (x @ layer["w3"])) @ layer["w2"]
    logits = norm(h, t["norm"]) @ t["lm_head"]
    return [logits.numpy(), torch.stack(keys).numpy(), torch.stack(values).numpy()]


@pytest.fixture(scope="module")
def decoder_and_weights(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    module = readme_decoder_module(tmp_path_factory.mktemp("readme"))
    arrays = random_weights(np.random.default_rng(11), LAYERS)
    decoder = module.build_decoder(dsl.initializers(arrays), CFG)
    model = decoder.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    return decoder, model, arrays


def _empty_cache() -> np.ndarray:
    return np.zeros((LAYERS, BATCH, CFG["kv_heads"], 0, CFG["head_dim"]), np.float32)


def _close(got: list, expected: list, what: str) -> None:
    for index, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-4, atol=1e-4, err_msg=f"{what}: output {index}")


def test_one_exported_model_matches_torch_for_every_length_and_a_decode_step(decoder_and_weights: tuple) -> None:
    _, model, arrays = decoder_and_weights
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # tiny tensors: threads only add waiting
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(tokens: np.ndarray, keys: np.ndarray, values: np.ndarray) -> list:
        return session.run(None, {"tokens": tokens, "past_keys": keys, "past_values": values})

    rng = np.random.default_rng(5)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _every_length(run, arrays, rng)
    finally:
        torch.set_num_threads(threads)


def _every_length(run: Any, arrays: dict, rng: np.random.Generator) -> None:
    for length in range(1, 34):
        tokens = rng.integers(0, CFG["vocab"], (BATCH, length)).astype(np.int64)
        prefill = run(tokens, _empty_cache(), _empty_cache())
        _close(prefill, torch_decoder(arrays, tokens, _empty_cache(), _empty_cache()), f"prefill {length}")
        step = rng.integers(0, CFG["vocab"], (BATCH, 1)).astype(np.int64)
        decoded = run(step, prefill[1], prefill[2])
        _close(decoded, torch_decoder(arrays, step, prefill[1], prefill[2]), f"decode after {length}")


@pytest.mark.parametrize("length", range(1, 34))
def test_eager_matches_torch(decoder_and_weights: tuple, length: int) -> None:
    decoder, _, arrays = decoder_and_weights
    rng = np.random.default_rng(length)
    tokens = rng.integers(0, CFG["vocab"], (BATCH, length)).astype(np.int64)
    prefill = decoder(tokens, _empty_cache(), _empty_cache())
    _close(list(prefill), torch_decoder(arrays, tokens, _empty_cache(), _empty_cache()), f"eager prefill {length}")
    step = rng.integers(0, CFG["vocab"], (BATCH, 1)).astype(np.int64)
    keys, values = np.asarray(prefill[1]), np.asarray(prefill[2])
    _close(list(decoder(step, keys, values)), torch_decoder(arrays, step, keys, values), "eager decode")


def test_each_weight_is_one_initializer_named_by_its_path(decoder_and_weights: tuple) -> None:
    _, model, arrays = decoder_and_weights
    names = [i.name for i in model.graph.initializer]
    expected = ["embed", "norm", "lm_head"] + [f"layers.{i}.{k}" for i in range(LAYERS) for k in arrays["layers"][i]]
    assert sorted(names) == sorted(expected)
    assert not [n for n in model.graph.node if n.op_type == "Constant" and n.attribute[0].t.dims
                and int(np.prod(n.attribute[0].t.dims)) >= CFG["dim"]], "a weight became a Constant"
