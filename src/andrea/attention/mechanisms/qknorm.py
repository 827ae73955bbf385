"""qknorm: softmax attention with queries and keys RMS-normalised per head (Dehghani et al., 2023,
"Scaling Vision Transformers to 22 Billion Parameters"; OLMo 2, 2024; with RMSNorm as OLMo 2 uses it).

    q_h' = RMSNorm(q_h),  k_h' = RMSNorm(k_h)      over each head's d channels, one learned gain each
    A = softmax(q_h' k_h'ᵀ / sqrt(d)),  out = A V   before RoPE, where RoPE is used

Normalised queries and keys bound the logits, which keeps attention from collapsing onto one key
(the training instability ViT-22B reports) without changing the softmax itself.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from andrea.attention.mechanisms.base import finite_number
from andrea.attention.mechanisms.softmax import Softmax


class QKNorm(Softmax):
    name = "qknorm"

    def __init__(self, *, eps: float = 1e-6, **sizes: Any) -> None:
        super().__init__(**sizes)
        if not finite_number(eps) or eps <= 0:
            raise ValueError(f"mechanism.eps={eps!r} must be a finite number > 0 (the RMSNorms' eps, 1e-6 by default)")
        self.q_norm = nn.RMSNorm(self.head_dim, eps=eps)
        self.k_norm = nn.RMSNorm(self.head_dim, eps=eps)

    def project(self, q: Tensor, k: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.q_norm(q), self.k_norm(k)  # (B, H, T, d), (B, H_kv, S, d): each head's d channels

    def extra_repr(self) -> str:
        return "qknorm (RMSNorm of queries and keys per head)"
