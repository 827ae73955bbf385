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

    def forward(  # type: ignore[override]
        self, x: Tensor, before: Tensor | None = None, seg: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """x (B, T, C) and the inputs before it (B, C, kernel - 1), zeros at a sequence's start -> the output
        (B, T, C) and the last kernel - 1 inputs, for the next call. With packed documents (`seg` (B, T), each
        token's document from 0, the one `before` is in) a token mixes only the inputs of its own document."""
        B, T, C = x.shape
        pad = self.kernel_size[0] - 1
        before = x.new_zeros(B, C, pad) if before is None else before
        window = torch.cat((before, x.transpose(1, 2)), dim=2)  # (B, C, pad + T)
        if seg is None:
            y = super().forward(window)
        else:
            segs = torch.cat((seg.new_zeros(B, pad), seg), dim=1)  # (B, pad + T)
            same = segs.unfold(1, pad + 1, 1) == seg.unsqueeze(-1)  # (B, T, kernel): a tap in the token's document
            taps = window.unfold(2, pad + 1, 1) * same.unsqueeze(1)  # (B, C, T, kernel)
            y = (taps * self.weight.view(1, C, 1, pad + 1)).sum(-1)
            y = y if self.bias is None else y + self.bias.view(1, C, 1)
            window = window * (segs == segs[:, -1:]).unsqueeze(1)  # what the next call reads: the last document's
        return F.silu(y).transpose(1, 2), window[:, :, window.shape[2] - pad :]
