"""RoPE (Su et al., 2021): rotate each pair of q and k channels by an angle
proportional to the token's position, so q_i · k_j depends on i - j only.

Channel pair (c, c + d/2) of head_dim d turns by position · base^(-2c/d), the
split-halves layout of GPT-NeoX and Llama. Applied after the QKV projection and
before attention, to queries and keys alike; values are left alone.

A head that holds several heads of its own (`parts`: differential attention's two
halves, each its own softmax map) has each part rotated as a head of d / parts
channels, as the paper's code does, so that every part's q·k depends on i - j only.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Rotary(nn.Module):
    inv_freq: Tensor  # (d/2,) buffer, d the width of one rotated part

    def __init__(self, head_dim: int, base: float = 10000.0, parts: int = 1) -> None:
        super().__init__()
        if head_dim % (2 * parts):
            whole = "" if parts == 1 else f" split in {parts} parts rotated on their own (a multiple of {2 * parts})"
            raise ValueError(
                f"position.kind=rope needs an even head_dim{whole}, got {head_dim} (model.net.d_model / "
                "heads.n_head); change heads.n_head or model.net.d_model"
            )
        width = head_dim // parts
        inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float32) / width)  # (d/2,)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.parts = parts

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """x (B, H, T, d) at positions start .. start + T - 1 -> rotated x (B, H, T, d)."""
        T = x.shape[2]
        positions = torch.arange(start, start + T, device=x.device, dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq)  # (T, d/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if self.parts > 1:  # (B, H, T, parts, d / parts): each part a head of its own
            return self._rotate(x.unflatten(-1, (self.parts, -1)), cos.unsqueeze(1), sin.unsqueeze(1)).flatten(-2)
        return self._rotate(x, cos, sin)

    @staticmethod
    def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x1, x2 = x.chunk(2, dim=-1)  # the two halves of every pair
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def extra_repr(self) -> str:
        return f"parts={self.parts}" if self.parts > 1 else ""
