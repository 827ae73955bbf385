"""gated_qknorm: Qwen3-Next's attention (Qwen Team, 2025): QK-norm (andrea.attention.mechanisms.qknorm) and the
sigmoid output gate of gated attention (andrea.attention.mechanisms.gated) in one layer.

    q_h' = RMSNorm(q_h),  k_h' = RMSNorm(k_h)                   per head, before RoPE
    z_h  = softmax(q_h' k_h'ᵀ / sqrt(d)) V_h
    z_h' = z_h ⊙ sigmoid(X W_θ^h),   out = concat_h(z_h') W_O     a gate per head and channel, from the query token

Takes both parents' settings: eps, over, scale, gain (the norms), gate_bias (the gate).
"""

from __future__ import annotations

from typing import Any

from andrea.attention.mechanisms.gated import Gated
from andrea.attention.mechanisms.qknorm import QKNorm


class GatedQKNorm(QKNorm, Gated):
    name = "gated_qknorm"

    def __init__(
        self, *, eps: float = 1e-6, over: str = "head", scale: float | None = None, gain: bool = True,
        gate_bias: bool | None = None, **sizes: Any,
    ) -> None:  # fmt: skip
        """QKNorm's settings, then Gated's (QKNorm hands gate_bias on to Gated, the next class in the order)."""
        super().__init__(eps=eps, over=over, scale=scale, gain=gain, gate_bias=gate_bias, **sizes)

    def extra_repr(self) -> str:
        return f"{QKNorm.extra_repr(self)}, then {Gated.extra_repr(self)}"
