"""gated: softmax attention with a sigmoid gate on each head's output (Qiu et al., 2025, "Gated Attention
for Large Language Models: Non-linearity, Sparsity, and Attention-Sink-Free"; the paper's best variant:
head-specific, elementwise, after scaled dot-product attention, before W_O).

    z_h  = softmax(Q_h K_hᵀ / sqrt(d)) V_h                  (B, T, d) per head, as softmax computes it
    z_h' = z_h ⊙ sigmoid(X W_θ^h)                          W_θ: (D, H·d), one gate per head and channel
    out  = concat_h(z_h') W_O

The gate depends on the query token only, so the weights are softmax's; the backend computes plain
softmax attention and the block applies the gate. W_θ has a bias where the layer's projections have one
(model.net.bias; Qwen3-Next's gate has none without attention_bias), unless `gate_bias` says otherwise.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from andrea.attention.mechanisms.softmax import Softmax


class Gated(Softmax):
    name = "gated"

    def __init__(self, *, gate_bias: bool | None = None, **sizes: Any) -> None:
        """gate_bias: whether W_θ has a bias; None: as the layer's projections (model.net.bias)."""
        super().__init__(**sizes)
        if gate_bias is not None and not isinstance(gate_bias, bool):
            raise ValueError(f"mechanism.gate_bias={gate_bias!r} must be true, false or null (as model.net.bias)")
        bias = self.projection_bias if gate_bias is None else gate_bias
        self.gate = nn.Linear(self.d_model, self.n_head * self.head_dim, bias=bias)  # W_θ

    def combine(self, z: Tensor, x: Tensor) -> Tensor:
        B, H, T, d = z.shape
        gate = torch.sigmoid(self.gate(x)).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)
        return z * gate.to(z.dtype)

    def extra_repr(self) -> str:
        return f"gated (sigmoid output gate per head and channel, bias={self.gate.bias is not None})"
