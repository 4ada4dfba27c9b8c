"""Recurrent-state operators of opset 27: LinearAttention and CausalConvWithState.

LinearAttention walks the sequence keeping a ``[batch, heads, d_k, d_v]`` state per
the ``update_rule`` (linear, gated, delta, gated_delta); CausalConvWithState is a
depthwise 1-d convolution over the past state followed by the input.  Both compute
in float32 at least, as the ONNX reference does, and return ``(output, state)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, steps, hidden = x.shape
    return x.reshape(batch, steps, heads, hidden // heads).transpose(1, 2)


def _wide(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype == torch.float64 else x.to(torch.float32)


def linear_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, past_state: torch.Tensor | None = None,
    decay: torch.Tensor | None = None, beta: torch.Tensor | None = None, chunk_size: int = 0,
    kv_num_heads: int = 1, q_num_heads: int = 1, scale: float = 0.0, update_rule: str = "gated_delta",
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, steps, _ = query.shape
    d_k = query.shape[-1] // q_num_heads
    d_v = value.shape[-1] // kv_num_heads
    q, k, v = (_wide(_heads(t, h)) for t, h in ((query, q_num_heads), (key, kv_num_heads), (value, kv_num_heads)))
    gates = None
    if decay is not None:
        if decay.shape[-1] == kv_num_heads:
            gates = _wide(decay.reshape(batch, steps, kv_num_heads, 1).transpose(1, 2))
        else:
            gates = _wide(_heads(decay, kv_num_heads))
    rates = None if beta is None else _wide(beta.reshape(batch, steps, beta.shape[-1], 1).transpose(1, 2))
    state = q.new_zeros(batch, kv_num_heads, d_k, d_v) if past_state is None else _wide(past_state)
    factor = scale if scale else 1 / math.sqrt(d_k)
    group = q_num_heads // kv_num_heads
    outputs = []
    for t in range(steps):
        v_t = v[:, :, t, :]
        if gates is not None:
            state = state * torch.exp(gates[:, :, t, :]).unsqueeze(-1)
        if rates is not None:
            v_t = rates[:, :, t, :] * (v_t - torch.einsum("bhdm,bhd->bhm", state, k[:, :, t, :]))
        state = state + k[:, :, t, :].unsqueeze(-1) * v_t.unsqueeze(-2)
        read = state if group == 1 else state.repeat_interleave(group, dim=1)
        outputs.append(factor * torch.einsum("bhd,bhdm->bhm", q[:, :, t, :], read))
    output = torch.stack(outputs, dim=2).transpose(1, 2).reshape(batch, steps, q_num_heads * d_v)
    state_dtype = query.dtype if past_state is None else past_state.dtype
    return output.to(query.dtype), state.to(state_dtype)


def causal_conv_with_state(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
    past_state: torch.Tensor | None = None, activation: str = "none",
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, channels, _ = input.shape
    width = weight.shape[2]
    history = input.new_zeros(batch, channels, width - 1) if past_state is None else past_state
    padded = torch.cat([history, input], dim=2)
    output = F.conv1d(padded, weight, bias, groups=channels)
    if activation in ("silu", "swish"):
        wide = _wide(output)
        output = (wide * torch.sigmoid(wide)).to(input.dtype)
    return output, padded[:, :, padded.shape[2] - (width - 1) :]


def optional_has_element(input: torch.Tensor | None = None) -> torch.Tensor:
    """A tensor reaching the kernel is present (an absent optional arrives as ``None``)."""
    return torch.tensor(input is not None)


def optional_get_element(input: torch.Tensor) -> torch.Tensor:
    return input
