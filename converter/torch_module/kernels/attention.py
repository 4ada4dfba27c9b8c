"""Transformer operators: Attention (opsets 23-25), RotaryEmbedding, SwiGLU, TensorScatter.

Attention follows the ONNX reference step by step: 3-d inputs are split into heads,
the past cache is concatenated, boolean masks become ``-inf`` biases, causal and
sliding-window masks are aligned bottom-right, grouped key/value heads are repeated,
scores are soft-capped, and a row that masks every key yields zeros instead of NaN.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from converter.torch_module.kernels.arguments import torch_dtype


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, sequence, hidden = x.shape
    return x.reshape(batch, sequence, heads, hidden // heads).transpose(1, 2)


def _safe_softmax(x: torch.Tensor) -> torch.Tensor:
    largest = x.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isneginf(largest), torch.zeros_like(largest), largest)
    exponent = torch.exp(x - shift)
    total = exponent.sum(dim=-1, keepdim=True)
    return exponent / torch.where(total == 0, torch.ones_like(total), total)


def _window_bias(
    base: torch.Tensor, offset: torch.Tensor | int, causal: bool, left: int, right: int
) -> torch.Tensor:
    """``base`` plus -inf where a query (shifted by ``offset``) may not see a key."""
    q_length, kv_length = base.shape[-2:]
    i = torch.arange(q_length, device=base.device).reshape(-1, 1)
    j = torch.arange(kv_length, device=base.device).reshape(1, -1)
    per_batch = isinstance(offset, torch.Tensor)
    shift = offset.reshape(-1, 1, 1) if isinstance(offset, torch.Tensor) else offset
    difference = (i + shift) - j
    allowed = torch.ones_like(difference, dtype=torch.bool)
    if causal:
        allowed &= difference >= 0
    if left >= 0:
        allowed &= difference <= left
    if right >= 0:
        allowed &= -difference <= right
    bias = torch.where(allowed, torch.zeros((), dtype=base.dtype), torch.full((), -math.inf, dtype=base.dtype))
    if per_batch:
        bias = bias.reshape(bias.shape[0], 1, q_length, kv_length)
    return base + bias


def _as_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if mask.dtype == torch.bool:
        return torch.where(mask, torch.zeros((), dtype=dtype), torch.full((), -math.inf, dtype=dtype))
    return mask


def _bias(
    q: torch.Tensor, kv_length: int, attn_mask: torch.Tensor | None, past_length: int | None,
    nonpad_kv_seqlen: torch.Tensor | None, is_causal: int, left: int, right: int,
) -> torch.Tensor:
    q_length = q.shape[2]
    bias = torch.zeros((q_length, kv_length), dtype=q.dtype, device=q.device)
    if attn_mask is not None:
        missing = kv_length - attn_mask.shape[-1]
        if missing > 0:
            fill = False if attn_mask.dtype == torch.bool else -math.inf
            attn_mask = torch.nn.functional.pad(attn_mask, [0, missing], value=fill)
        bias = bias + _as_bias(attn_mask, q.dtype)
    offset: torch.Tensor | int = past_length or 0
    if past_length is None and nonpad_kv_seqlen is not None:
        offset = nonpad_kv_seqlen.reshape(-1).to(torch.int64) - q_length
    if is_causal or left >= 0 or right >= 0:
        bias = _window_bias(bias, offset, bool(is_causal), left, right)
    if nonpad_kv_seqlen is not None:
        keep = torch.arange(kv_length, device=q.device) < nonpad_kv_seqlen.reshape(-1, 1)
        bias = bias + _as_bias(keep.reshape(q.shape[0], 1, 1, kv_length), q.dtype)
    return bias


def _f32(t: torch.Tensor | None) -> Any:
    return t.to(torch.float32) if t is not None and t.is_floating_point() else t


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
    past_key: torch.Tensor | None = None, past_value: torch.Tensor | None = None,
    nonpad_kv_seqlen: torch.Tensor | None = None, is_causal: int = 0, kv_num_heads: int | None = None,
    q_num_heads: int | None = None, qk_matmul_output_mode: int = 0, scale: float | None = None,
    softcap: float = 0.0, softmax_precision: int | None = None, left_window_size: int = -1,
    right_window_size: int = -1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Y, present_key, present_value and the chosen QK product (qk_matmul_output_mode).

    16-bit inputs are computed in float32 and rounded once at the end (as fused attention
    kernels do); the caches are returned in the inputs' own type."""
    if q.dtype in (torch.float16, torch.bfloat16):
        y, _, _, chosen = attention(_f32(q), _f32(k), _f32(v), _f32(attn_mask), _f32(past_key), _f32(past_value),
                                    nonpad_kv_seqlen=nonpad_kv_seqlen, is_causal=is_causal, kv_num_heads=kv_num_heads, q_num_heads=q_num_heads,
                                    qk_matmul_output_mode=qk_matmul_output_mode, scale=scale, softcap=softcap,
                                    softmax_precision=softmax_precision, left_window_size=left_window_size,
                                    right_window_size=right_window_size)
        if q.dim() == 3:
            k, v = _heads(k, kv_num_heads or 1), _heads(v, kv_num_heads or 1)
        present_key = k if past_key is None else torch.cat([past_key, k], dim=2)
        present_value = v if past_value is None else torch.cat([past_value, v], dim=2)
        return y.to(q.dtype), present_key, present_value, chosen.to(q.dtype)
    three_d = q.dim() == 3
    if three_d:
        assert q_num_heads is not None and kv_num_heads is not None
        q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
    root_scale = math.sqrt(scale if scale is not None else 1 / math.sqrt(q.shape[3]))
    present_key = k if past_key is None else torch.cat([past_key, k], dim=2)
    present_value = v if past_value is None else torch.cat([past_value, v], dim=2)
    bias = _bias(q, present_key.shape[2], attn_mask, None if past_key is None else past_key.shape[2],
                 nonpad_kv_seqlen, is_causal, left_window_size, right_window_size)
    keys, values = present_key, present_value
    if q.shape[1] != keys.shape[1] and q.shape[1] % keys.shape[1] == 0:
        keys = keys.repeat_interleave(q.shape[1] // keys.shape[1], dim=1)
        values = values.repeat_interleave(q.shape[1] // values.shape[1], dim=1)
    scores = (q * root_scale) @ (keys.transpose(2, 3) * root_scale)
    if softcap > 0:
        scores = torch.tanh(scores / softcap) * softcap
    with_bias = scores + bias
    chosen = with_bias if qk_matmul_output_mode == 2 else scores
    weights_in = with_bias.to(torch_dtype(softmax_precision)) if softmax_precision else with_bias
    weights = _safe_softmax(weights_in)
    fully_masked = torch.isneginf(bias.amax(dim=-1, keepdim=True))
    weights = torch.where(fully_masked, torch.zeros((), dtype=weights.dtype), weights)
    if qk_matmul_output_mode == 3:
        chosen = weights
    y = weights.to(q.dtype) @ values
    if three_d:
        y = y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
    return y, present_key, present_value, chosen.to(q.dtype)


def rotary_embedding(
    input: torch.Tensor, cos_cache: torch.Tensor, sin_cache: torch.Tensor,
    position_ids: torch.Tensor | None = None, interleaved: int = 0, num_heads: int = 0,
    rotary_embedding_dim: int = 0,
) -> torch.Tensor:
    shape = input.shape
    x = input.transpose(1, 2) if input.dim() == 4 else input.reshape(shape[0], shape[1], num_heads, -1)
    dim = rotary_embedding_dim or x.shape[3]
    rotated, kept = x[..., :dim], x[..., dim:]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache.unsqueeze(2), sin_cache.unsqueeze(2)
    if interleaved:
        x1, x2 = rotated[..., 0::2], rotated[..., 1::2]
    else:
        x1, x2 = rotated.chunk(2, dim=-1)
    real, imaginary = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = torch.stack([real, imaginary], dim=-1).reshape(rotated.shape)
    else:
        rotated = torch.cat([real, imaginary], dim=-1)
    output = torch.cat([rotated, kept], dim=-1)
    return output.transpose(1, 2) if input.dim() == 4 else output.reshape(shape)


def swiglu(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return a * torch.sigmoid(alpha * a) * b


def tensor_scatter(
    past_cache: torch.Tensor, update: torch.Tensor, write_indices: torch.Tensor | None = None,
    axis: int = -2, mode: str = "linear",
) -> torch.Tensor:
    """Write ``update`` into the cache along ``axis`` at each batch entry's write index."""
    dim = axis % past_cache.dim()
    capacity, length = past_cache.shape[dim], update.shape[dim]
    starts = (torch.zeros(past_cache.shape[0], dtype=torch.int64, device=past_cache.device)
              if write_indices is None else write_indices.to(torch.int64))
    positions = starts.reshape(-1, 1) + torch.arange(length, device=past_cache.device).reshape(1, -1)
    if mode == "circular":
        positions = positions % capacity
    shape = [1] * past_cache.dim()
    shape[0], shape[dim] = past_cache.shape[0], length
    index = positions.reshape(shape).expand(update.shape)
    return torch.scatter(past_cache, dim, index, update)
