"""RoPE (Su et al., 2021): rotate each pair of q and k channels by an angle
proportional to the token's position, so q_i · k_j depends on i - j only.

`fraction` of each head's channels turn (partial RoPE, GPT-NeoX's rotary_pct, Qwen3-Next's
partial_rotary_factor): the first fraction · d channels, the rest pass unrotated.

Channel pair (c, c + d/2) of head_dim d turns by position · base^(-2c/d), the
split-halves layout of GPT-NeoX and Llama; `interleaved` turns the adjacent pairs (2c, 2c + 1)
instead, the layout of GPT-J and Meta's own Llama code (Llama 4's checkpoints). Applied after the QKV projection and
before attention, to queries and keys alike; values are left alone.

`yarn` stretches the frequencies to a longer context than the model trained on, and scales cos and sin by
its attention factor (andrea.attention.positions.yarn; gpt-oss).

A head that holds several heads of its own (`parts`: differential attention's two
halves, each its own softmax map) has each part rotated as a head of d / parts
channels, as the paper's code does, so that every part's q·k depends on i - j only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.positions.yarn import yarn_frequencies


class Rotary(nn.Module):
    inv_freq: Tensor  # (d/2,) buffer, d the width of one rotated part

    def __init__(
        self, head_dim: int, base: float = 10000.0, parts: int = 1, fraction: float = 1.0,
        yarn: Mapping[str, Any] | None = None, interleaved: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        if head_dim % (2 * parts):
            whole = "" if parts == 1 else f" split in {parts} parts rotated on their own (a multiple of {2 * parts})"
            raise ValueError(
                f"position.kind=rope needs an even head_dim{whole}, got {head_dim} (model.net.d_model / "
                "heads.n_head); change heads.n_head or model.net.d_model"
            )
        width = rotated_width(head_dim // parts, fraction)
        inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float32) / width)  # (r/2,), r rotated channels
        self.attention_factor = 1.0  # what cos and sin are scaled by
        if yarn is not None:
            inv_freq, self.attention_factor = yarn_frequencies(width, base, yarn)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.parts, self.base, self.width, self.fraction, self.yarn = parts, base, width, fraction, yarn
        self.interleaved = interleaved

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """x (B, H, T, d) at positions start .. start + T - 1 -> rotated x (B, H, T, d)."""
        T = x.shape[2]
        positions = torch.arange(start, start + T, device=x.device, dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq)  # (T, d/2)
        cos, sin = angles.cos(), angles.sin()
        if self.attention_factor != 1.0:
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        if self.parts > 1:  # (B, H, T, parts, d / parts): each part a head of its own
            return self._rotate(x.unflatten(-1, (self.parts, -1)), cos.unsqueeze(1), sin.unsqueeze(1)).flatten(-2)
        return self._rotate(x, cos, sin)

    def _rotate(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        turned, passed = x[..., : self.width], x[..., self.width :]  # (.., r), (.., d - r)
        if self.interleaved:  # pairs side by side: (x_0, x_1), (x_2, x_3), ...
            x1, x2 = turned[..., 0::2], turned[..., 1::2]
            pairs = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (.., r/2, 2)
            return torch.cat((pairs.flatten(-2), passed), dim=-1)
        x1, x2 = turned.chunk(2, dim=-1)  # the two halves of every pair
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos, passed), dim=-1)

    def extra_repr(self) -> str:
        shown = [f"parts={self.parts}"] if self.parts > 1 else []
        shown += [f"base={self.base:g}"] if self.base != 10000.0 else []
        shown += [f"fraction={self.fraction:g}"] if self.fraction != 1.0 else []
        shown += ["interleaved"] if self.interleaved else []
        return ", ".join(shown + ([f"yarn={dict(self.yarn)}"] if self.yarn else []))


def rotated_width(head_dim: int, fraction: float) -> int:
    """The channels of a head (or of one part of it) that RoPE turns: fraction · head_dim; a fraction that turns
    none or an odd count is refused (ValueError naming position.fraction)."""
    problem = fraction_problem(head_dim, fraction)
    if problem:
        raise ValueError(f"position.fraction{problem}")
    return int(head_dim * fraction)


def fraction_problem(head_dim: int, fraction: object) -> str | None:
    """What is wrong with turning `fraction` of a head of `head_dim` channels ("=<value> ..."), or None."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        return f"={fraction!r} must be a number in (0, 1]: the share of each head's channels RoPE turns"
    width = head_dim * fraction
    if width != int(width) or int(width) % 2 or width < 2:
        return (
            f"={fraction} of a head of {head_dim} channels turns {width:g}: RoPE turns an even number of channels, "
            f"at least 2; give a fraction that makes fraction x {head_dim} an even integer"
        )
    return None
