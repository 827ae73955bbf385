"""ALiBi (Press et al., 2022): no position embedding at all; each head penalises
distant keys linearly, score += -m_h · |i - j|, with a fixed slope m_h per head.

The slopes form a geometric sequence 2^(-8/n), 2^(-16/n), ... for n heads (a
power of two); other head counts take the closest power of two below and fill
the rest from the sequence of twice as many heads, as the paper's code does.
Under a causal mask |i - j| = i - j; a bidirectional mask sees the symmetric bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from andrea.attention.positions.score_mod import ScoreMod


def alibi_slopes(n_head: int) -> list[float]:
    def geometric(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    closest = 2 ** int(math.log2(n_head))
    return geometric(closest) + geometric(2 * closest)[0::2][: n_head - closest]


@dataclass(frozen=True)
class ALiBi(ScoreMod):
    n_head: int
    kind: ClassVar[str] = "alibi"

    def bias(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        slopes = torch.tensor(alibi_slopes(self.n_head), device=q_idx.device)  # (H,)
        return -slopes[h] * (q_idx - kv_idx).abs()
