"""Retention (Sun et al. 2023, RetNet): linear attention whose state decays by a fixed rate per head,

    S_t = γ_h S_{t-1} + k_t v_tᵀ,    γ_h = 1 - 2^(-5-h)      (h = 0 .. H-1: each head its own memory length)

with RoPE on q and k, values twice the keys' width, and a swish output gate times a per-head RMSNorm
(MIXERS.md). The decay needs no parameter: it is fixed by the head's index.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from andrea.attention.masks import Mask
from andrea.attention.positions import Rotary
from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.linear_reference import recurrence
from andrea.ops.gated_linear import CHUNK


class Retention(LinearMixer):
    name = "retention"
    log_gamma: Tensor  # (H,) log γ_h, a buffer: it moves with the layer and is never trained

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, expand_v: float = 2.0, form: str = "chunked", chunk: int = CHUNK,
        conv: bool = False, gate: bool = True, norm: bool = True,
    ) -> None:  # fmt: skip
        head = d_model // n_head
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head,
                         value_dim=max(1, int(head * expand_v)), form=form, chunk=chunk, conv=conv, gate=gate,
                         norm=norm)  # fmt: skip
        self.rope = Rotary(self.key_dim)
        gamma = [1 - 2.0 ** (-5 - h) for h in range(n_head)]
        self.register_buffer("log_gamma", torch.tensor([math.log(g) for g in gamma]), persistent=False)

    def features(self, q: Tensor, k: Tensor, start: int) -> tuple[Tensor, Tensor]:
        return self.rope(q, start), self.rope(k, start)

    def log_decay(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return self.log_gamma.to(x.dtype).view(1, -1, 1).expand(B, -1, T)  # (B, H, T): the same decay every token

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """Retention as the paper writes its recurrence, one token at a time (andrea.mixers.linear_reference):
        S_t = γ_h S_{t-1} + k̃_t v_tᵀ, o_t = S_tᵀ q̃_t / sqrt(K), q̃_t and k̃_t turned by RoPE to position t. γ_h is the
        layer's own (its log_gamma buffer), as its parameters are: 1 - 2^(-5-h) written again in float64 would differ
        from the buffer's float32 rounding by more than the kit's decode tolerance."""
        gamma = self.log_gamma.exp().view(1, -1, 1)  # (1, H, 1)
        return recurrence(self, x, mask, lambda token, q, k: (*self._turned(q, k, token.t), gamma))

    def _turned(self, q: Tensor, k: Tensor, t: int) -> tuple[Tensor, Tensor]:
        """One token's q and k (B, H, K) at position t, as RoFormer writes RoPE: each pair (u_i, u_{i + K/2}) a
        complex number times e^{i t θ_i}, θ the layer's frequencies."""
        turn = torch.polar(torch.ones_like(self.rope.inv_freq), t * self.rope.inv_freq)  # (K/2,) e^{i t θ}
        turned = (torch.complex(*u.chunk(2, dim=-1)) * turn for u in (q, k))
        q_t, k_t = (torch.cat((u.real, u.imag), dim=-1) for u in turned)
        return q_t, k_t
