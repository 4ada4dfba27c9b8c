"""Signal and geometry operators: DFT, BitCast, AffineGrid, GridSample, Col2Im.

DFT keeps ONNX's real layout (a trailing dimension of 1 for real or 2 for real and
imaginary parts) around ``torch.fft``; GridSample and AffineGrid map onto
``F.grid_sample`` / ``F.affine_grid``, whose conventions ONNX adopted.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.arguments import IntsLike, ints, torch_dtype


def bit_cast(x: torch.Tensor, to: int) -> torch.Tensor:
    return x.view(torch_dtype(to))


def _complex(x: torch.Tensor) -> torch.Tensor:
    if x.shape[-1] == 1:
        return x.squeeze(-1)
    return torch.complex(x[..., 0], x[..., 1])


def _dft(x: torch.Tensor, length: int | None, axis: int, inverse: int, onesided: int) -> torch.Tensor:
    dim = axis % x.dim()
    if length is None:
        length = 2 * (x.shape[dim] - 1) if inverse and onesided else x.shape[dim]
    signal = _complex(x)
    if inverse and onesided:
        return torch.fft.irfft(signal, n=length, dim=dim).unsqueeze(-1).to(x.dtype)
    spectrum = torch.fft.ifft(signal, n=length, dim=dim) if inverse else torch.fft.fft(signal, n=length, dim=dim)
    if onesided and not inverse:
        spectrum = spectrum.narrow(dim, 0, length // 2 + 1)
    if not spectrum.is_complex():
        spectrum = spectrum.to(torch.complex128)
    return torch.stack([spectrum.real, spectrum.imag], dim=-1).to(x.dtype)


def dft_17(
    x: torch.Tensor, dft_length: IntsLike = None, axis: int = 1, inverse: int = 0, onesided: int = 0
) -> torch.Tensor:
    """Opset 17: ``axis`` is an attribute (default 1)."""
    length = None if dft_length is None else ints(dft_length)[0]
    return _dft(x, length, axis, inverse, onesided)


def dft(
    x: torch.Tensor, dft_length: IntsLike = None, axis: IntsLike = None, inverse: int = 0, onesided: int = 0
) -> torch.Tensor:
    """Opset 20: ``axis`` is an input (default -2)."""
    length = None if dft_length is None or not ints(dft_length) else ints(dft_length)[0]
    return _dft(x, length, ints(axis)[0] if axis is not None else -2, inverse, onesided)


def affine_grid(theta: torch.Tensor, size: IntsLike, align_corners: int = 0) -> torch.Tensor:
    return F.affine_grid(theta, list(ints(size)), align_corners=bool(align_corners))


_GRID_MODES = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest", "cubic": "bicubic", "bicubic": "bicubic"}


def grid_sample(
    x: torch.Tensor, grid: torch.Tensor, align_corners: int = 0, mode: str = "linear", padding_mode: str = "zeros"
) -> torch.Tensor:
    return F.grid_sample(x, grid.to(x.dtype), mode=_GRID_MODES[mode], padding_mode=padding_mode, align_corners=bool(align_corners))


def col2im(
    input: torch.Tensor, image_shape: IntsLike, block_shape: IntsLike,
    dilations: Sequence[int] | None = None, pads: Sequence[int] | None = None, strides: Sequence[int] | None = None,
) -> torch.Tensor:
    """Any number of spatial dimensions: every (block offset, window) pair adds its value
    at ``window * stride + offset * dilation`` of the padded image, which is then cropped."""
    image, block = list(ints(image_shape)), list(ints(block_shape))
    rank = len(image)
    pad = list(pads) if pads else [0] * (2 * rank)
    stride = list(strides) if strides else [1] * rank
    dilation = list(dilations) if dilations else [1] * rank
    padded = [size + pad[i] + pad[i + rank] for i, size in enumerate(image)]
    windows = [(padded[i] - dilation[i] * (block[i] - 1) - 1) // stride[i] + 1 for i in range(rank)]
    offsets = torch.cartesian_prod(*[torch.arange(k) for k in block]).reshape(-1, rank)
    starts = torch.cartesian_prod(*[torch.arange(w) for w in windows]).reshape(-1, rank)
    positions = offsets.unsqueeze(1) * torch.tensor(dilation) + starts.unsqueeze(0) * torch.tensor(stride)
    flat = torch.zeros(positions.shape[:2], dtype=torch.int64)
    for i in range(rank):
        flat = flat * padded[i] + positions[..., i]
    batch, channels = input.shape[0], input.shape[1] // offsets.shape[0]
    values = input.reshape(batch, channels, -1)
    total = 1
    for size in padded:
        total *= size
    summed = values.new_zeros(batch, channels, total).index_add(2, flat.reshape(-1).to(input.device), values)
    result = summed.reshape(batch, channels, *padded)
    for i in range(rank):
        result = result.narrow(2 + i, pad[i], image[i])
    return result




def stft(
    signal: torch.Tensor, frame_step: IntsLike, window: torch.Tensor | None = None,
    frame_length: IntsLike = None, onesided: int = 1,
) -> torch.Tensor:
    """Frames of ``signal`` [batch, length, 1 or 2], windowed, Fourier-transformed:
    [batch, frames, bins, 2]."""
    step = ints(frame_step)[0]
    length = ints(frame_length)[0] if frame_length is not None else int(window.shape[0])  # type: ignore[union-attr]
    frames = _complex(signal).unfold(1, length, step)
    if window is not None:
        frames = frames * window.to(frames.dtype if not frames.is_complex() else signal.dtype)
    spectrum = torch.fft.fft(frames, n=length, dim=-1)
    if onesided:
        spectrum = spectrum[..., : length // 2 + 1]
    return torch.stack([spectrum.real, spectrum.imag], dim=-1).to(signal.dtype)
