"""fox: forgetting attention (Lin et al., ICLR 2025, "Forgetting Transformer: Softmax Attention with a Forget
Gate"). Each head forgets at a rate its input sets:

    A_ij = softmax_j(s_ij + F_i - F_j),   F_t = Σ_{l<=t} log f_l,   f_t = sigmoid(w_h·x_t + b_h) per head

for keys j <= i the mask allows: a key's weight decays by every forget gate between it and the query. F_i is
the same for every key of row i and leaves the softmax as it is; -F_j rides in the keys as one more channel
(q's is 1, k's is -F_j / scale), so every backend whose values may be narrower than its queries and keys (eager,
naive, sdpa) runs it as softmax, a KV cache keeps each key's F_j, and decoding continues F from the last one.
No position encoding by default (the paper's choice), though RoPE composes (it turns the first d channels).
One gate per head: under grouped heads a key serves several query heads, so fox needs heads=mha.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.mechanisms.softmax import Softmax


class Fox(Softmax):
    name = "fox"
    extra_channels: ClassVar[int] = 1
    weights_meaning = "forgetting attention: softmax of q·k + F_i - F_j, F the summed log forget gates (rows sum to 1)"

    def __init__(self, **sizes: Any) -> None:
        super().__init__(**sizes)
        self.forget = nn.Linear(self.d_model, self.n_head, bias=True)  # f_t = sigmoid(W_f x_t + b_f)

    def scale(self) -> float:
        return 1 / math.sqrt(self.head_dim)  # the head's d, not the d + 1 channels its queries carry

    def log_forget(self, x: Tensor) -> Tensor:
        """log f_t (B, H, T), <= 0."""
        return F.logsigmoid(self.forget(x)).transpose(1, 2)

    def extend(self, q: Tensor, k: Tensor, x: Tensor, cached: Tensor | None) -> tuple[Tensor, Tensor]:
        """q (B, H, T, d) -> (B, H, T, d + 1) with a channel of ones; k -> k with -F_j / scale, F continued from
        the last cached key's (`cached`: the KV cache's keys, (B, H, S', d + 1), or None)."""
        if k.shape[1] != self.n_head:
            raise ValueError(
                f"mechanism=fox keeps one forget gate per head in its keys, and {k.shape[1]} key heads serve "
                f"{self.n_head} query heads; use heads=mha"
            )
        scale = self.scale()
        cum = self.log_forget(x).to(torch.promote_types(k.dtype, torch.float32)).cumsum(dim=-1)  # (B, H, T)
        if cached is not None and cached.shape[2]:
            cum = cum - cached[:, :, -1:, -1].to(cum.dtype) * scale  # the last key's F, continued
        q = torch.cat((q, torch.ones_like(q[..., :1])), dim=-1)
        k = torch.cat((k, (-cum / scale).unsqueeze(-1).to(k.dtype)), dim=-1)
        return q, k

    def extra_repr(self) -> str:
        return "fox"
