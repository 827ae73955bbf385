"""Gated linear attention (Yang et al. 2024, "Gated Linear Attention Transformers with Hardware-Efficient
Training"): linear attention whose state decays per key channel by a gate computed from the token,

    S_t = diag(α_t) S_{t-1} + k_t v_tᵀ,    log α_t = logsigmoid(W_2 W_1 x_t + b) / 16   (rank 16)

with keys half the width of values (`expand_k` 0.5), a per-head RMSNorm and a swish output gate (MIXERS.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.linear_reference import recurrence
from andrea.ops.gated_linear import CHUNK

GATE_RANK, GATE_DIVISOR = 16, 16  # the low-rank gate projection, and the published normaliser of its log


class GLA(LinearMixer):
    name = "gla"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_k: float = 0.5, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = False, gate: bool = True, norm: bool = True,
    ) -> None:  # fmt: skip
        head = d_model // n_head
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head,
                         key_dim=max(1, int(head * expand_k)), form=form, chunk=chunk, conv=conv, gate=gate,
                         norm=norm)  # fmt: skip
        self.decay = nn.Sequential(
            nn.Linear(d_model, GATE_RANK, bias=False), nn.Linear(GATE_RANK, n_head * self.key_dim, bias=True)
        )

    def log_decay(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        g = F.logsigmoid(self.decay(x)) / GATE_DIVISOR  # (B, T, H·K), <= 0
        return g.view(B, T, self.n_head, self.key_dim).transpose(1, 2)  # (B, H, T, K)

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """GLA as the paper writes its recurrence, one token at a time (andrea.mixers.linear_reference):
        S_t = diag(α_t) S_{t-1} + k_t v_tᵀ, o_t = S_tᵀ q_t / sqrt(K), α_t = sigmoid(W_2 W_1 x_t + b)^(1/16)."""
        return recurrence(self, x, mask, lambda token, q, k: (q, k, self._alpha(token.x).view_as(k)))

    def _alpha(self, x_t: Tensor) -> Tensor:
        """One token's gate α_t (B, H·K) in (0, 1): the 16th root of a sigmoid, exp(logsigmoid(·) / 16)."""
        return torch.sigmoid(self.decay(x_t)) ** (1 / GATE_DIVISOR)
