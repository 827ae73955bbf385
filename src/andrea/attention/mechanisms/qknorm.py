"""qknorm: softmax attention with queries and keys RMS-normalised (Dehghani et al., 2023, "Scaling Vision
Transformers to 22 Billion Parameters"; OLMo 2, 2024; with RMSNorm as OLMo 2 uses it).

    q_h' = RMSNorm(q_h),  k_h' = RMSNorm(k_h)      over each head's d channels (`over: head`, Qwen3, Gemma 3), or
                                                    over the whole projection, H·d and H_kv·d (`over: projection`,
                                                    OLMo 2 and 3), one learned gain per channel (none with
                                                    `gain: false`: Llama 4's weightless norm)
    A = softmax(q_h' k_h'ᵀ · scale),  out = A V     before RoPE, where RoPE is used; scale 1/sqrt(d), or the
                                                    `scale` given (Gemma 3: query_pre_attn_scalar^-1/2)

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

    def __init__(
        self, *, eps: float = 1e-6, over: str = "head", scale: float | None = None, gain: bool = True, **sizes: Any
    ) -> None:
        super().__init__(**sizes)
        if scale is not None and (not finite_number(scale) or scale <= 0):
            raise ValueError(f"mechanism.scale={scale!r} must be a finite number > 0, or null (1/sqrt(head_dim))")
        self.score_scale = scale
        if not finite_number(eps) or eps <= 0:
            raise ValueError(f"mechanism.eps={eps!r} must be a finite number > 0 (the RMSNorms' eps, 1e-6 by default)")
        if over not in OVER:
            raise ValueError(f"mechanism.over={over!r} must be one of {', '.join(OVER)}")
        if not isinstance(gain, bool):
            raise ValueError(f"mechanism.gain={gain!r} must be true or false (a learned gain per channel, or none)")
        whole = over == "projection"
        self.over, self.gain = over, gain
        self.q_norm = nn.RMSNorm(self.head_dim * (self.n_head if whole else 1), eps=eps, elementwise_affine=gain)
        self.k_norm = nn.RMSNorm(self.head_dim * (self.n_kv_head if whole else 1), eps=eps, elementwise_affine=gain)

    def scale(self) -> float | None:
        return self.score_scale

    def project(self, q: Tensor, k: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.over == "head":
            return self.q_norm(q), self.k_norm(k)  # (B, H, T, d), (B, H_kv, S, d): each head's d channels
        return _across_heads(self.q_norm, q), _across_heads(self.k_norm, k)

    def extra_repr(self) -> str:
        where = "per head" if self.over == "head" else "over all heads"
        return f"qknorm (RMSNorm of queries and keys {where}{'' if self.gain else ', no gain'})"


OVER = ("head", "projection")


def _across_heads(norm: nn.Module, x: Tensor) -> Tensor:
    """x (B, H, T, d) normalised over its H·d channels together, as one projection's output."""
    B, H, T, d = x.shape
    return norm(x.transpose(1, 2).reshape(B, T, H * d)).view(B, T, H, d).transpose(1, 2)
