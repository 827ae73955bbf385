"""diff: differential attention (Ye et al., ICLR 2025, "Differential Transformer").

Each head's queries and keys are split into two halves of d/2 channels, giving two softmax maps;
their difference cancels the attention both give to irrelevant keys ("attention noise"):

    A_h  = softmax(Q1_h K1_hᵀ · s) - λ · softmax(Q2_h K2_hᵀ · s)     s = 1/sqrt(d/2); rows sum to 1 - λ
    z_h  = (1 - λ_init) · RMSNorm(A_h V_h)                            per head, over its d channels
    out  = concat_h(z_h) W_O

    λ = exp(λ_q1 · λ_k1) - exp(λ_q2 · λ_k2) + λ_init                 λ_* in R^(d/2), N(0, 0.1²) at init
    λ_init = 0.8 - 0.6 · exp(-0.3 · (l - 1))                          l = 1, 2, ...: the layer's depth

With position=rope, each half is rotated as a head of its own (d/2 channels, `rope_parts = 2`), as the paper's
code rotates its 2H half-heads: each map's scores then depend on i - j only.

Heads keep andrea's width d (the paper halves the head count instead, for the same parameters).
Backends that run it: those computing any mechanism's dense form (eager, naive).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.attention.mechanisms.base import Mechanism, dense_allowed, dense_scores, scores_of, softmax_of
from andrea.attention.mechanisms.softmax import masked_softmax
from andrea.attention.positions import ScoreMod


class Diff(Mechanism):
    name = "diff"
    kernel = "diff"
    rope_parts = 2  # Q1/K1 and Q2/K2: two heads of d/2 channels for RoPE
    rows_sum_to_one = False
    signed = True
    weights_meaning = "differential weights (two softmax maps subtracted: signed, rows sum to 1 - λ)"

    def __init__(self, **sizes: Any) -> None:
        super().__init__(**sizes)
        if self.head_dim % 2:
            raise ValueError(
                f"mechanism=diff splits each head in two halves: head_dim={self.head_dim} must be even "
                "(model.net.d_model / heads.n_head)"
            )
        half = self.head_dim // 2
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * self.layer)  # depth l = layer + 1
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(half) * 0.1) for _ in range(4)
        )
        self.norm = nn.RMSNorm(self.head_dim, eps=1e-5)

    def scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim // 2)  # each map's queries and keys have d/2 channels

    def lam(self) -> Tensor:
        """λ, a scalar tensor (it trains through the four vectors)."""
        q1k1, q2k2 = (self.lambda_q1 * self.lambda_k1).sum(), (self.lambda_q2 * self.lambda_k2).sum()
        return torch.exp(q1k1) - torch.exp(q2k2) + self.lambda_init

    def weights(self, q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None) -> Tensor:
        (q1, q2), (k1, k2) = q.chunk(2, dim=-1), k.chunk(2, dim=-1)  # (B, H, T, d/2), (B, H_kv, S, d/2)
        B, H, T, _ = q.shape
        allowed = dense_allowed(mask, B, H, T, k.shape[2], device=q.device)  # (B|1, H|1, T, S)
        attends_self = mask is None or mask.attends_self
        a1 = masked_softmax(dense_scores(q1, k1, scale, score_mod), allowed, attends_self, inplace=True)
        a2 = masked_softmax(dense_scores(q2, k2, scale, score_mod), allowed, attends_self, inplace=True)
        return a1 - self.lam().to(a1.dtype) * a2  # (B, H, T, S)

    def head_weights(
        self, q_h: Tensor, k_h: Tensor, scale: float, bias_h: Tensor | None, allowed_h: Tensor | None,
        attends_self: bool, head: int,
    ) -> Tensor:  # fmt: skip
        maps = []
        for q_part, k_part in zip(q_h.chunk(2, dim=-1), k_h.chunk(2, dim=-1), strict=True):  # Q1 K1ᵀ, Q2 K2ᵀ
            s = q_part @ k_part.transpose(-2, -1) * scale  # (B, T, S)
            if bias_h is not None:
                s = s + bias_h
            maps.append(masked_softmax(s, allowed_h, attends_self))
        return maps[0] - self.lam().to(q_h.dtype) * maps[1]  # (B, T, S)

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        half = q.shape[-1] // 2
        maps = [
            softmax_of(scores_of(q[..., part], k[..., part], scale, bias), allowed)
            for part in (slice(0, half), slice(half, None))  # Q1 K1ᵀ, Q2 K2ᵀ
        ]
        vectors = [v.to(q.dtype) for v in (self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2)]
        lam = torch.exp(vectors[0] @ vectors[1]) - torch.exp(vectors[2] @ vectors[3]) + self.lambda_init
        return maps[0] - lam * maps[1]

    def combine(self, z: Tensor, x: Tensor) -> Tensor:
        return (1 - self.lambda_init) * self.norm(z)  # (B, H, T, d): each head normalised on its own

    def extra_repr(self) -> str:
        return f"diff, lambda_init={self.lambda_init:.3f}"
