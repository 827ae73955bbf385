"""The short causal depthwise convolution the linear mixers put on their projections (kernel 4, MIXERS.md), with
the last kernel - 1 inputs kept for generation: x (B, T, C) -> (B, T, C), each channel mixing its own last
`kernel` values, then SiLU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ShortConv(nn.Conv1d):
    def __init__(self, channels: int, kernel: int = 4, bias: bool = False) -> None:
        super().__init__(channels, channels, kernel, groups=channels, padding=0, bias=bias)

    def forward(self, x: Tensor, before: Tensor | None = None) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        """x (B, T, C) and the inputs before it (B, C, kernel - 1), zeros at a sequence's start -> the output
        (B, T, C) and the last kernel - 1 inputs, for the next call."""
        B, _, C = x.shape
        pad = self.kernel_size[0] - 1
        before = x.new_zeros(B, C, pad) if before is None else before
        window = torch.cat((before, x.transpose(1, 2)), dim=2)  # (B, C, pad + T)
        y = F.silu(super().forward(window)).transpose(1, 2)  # (B, T, C)
        return y, window[:, :, window.shape[2] - pad :]
