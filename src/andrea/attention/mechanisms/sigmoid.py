"""sigmoid: sigmoid attention (Ramapuram et al., ICLR 2025, "Theory, Analysis, and Best Practices for
Sigmoid Self-Attention").

    A_ij = sigmoid(q_i·k_j / sqrt(d) + b)   for allowed keys, 0 for masked ones; rows do not sum to 1
    out  = A V                              b = -log(n) by default, n the layer's max_context

Each weight is on its own: no normalisation across keys, no running max. The paper's b = -log(n)
keeps a row's total weight near 1 at the start of training; n is the layer's context length
(fixed, so a KV cache's decode step computes what the full forward does).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from andrea.attention.mechanisms.base import Mechanism, finite_number, scores_of


class Sigmoid(Mechanism):
    name = "sigmoid"
    kernel = "sigmoid"
    rows_sum_to_one = False
    weights_meaning = "sigmoid weights (each in [0, 1] on its own; rows do not sum to 1)"

    def __init__(self, *, bias: float | None = None, **sizes: Any) -> None:
        super().__init__(**sizes)
        if bias is not None and not finite_number(bias):
            raise ValueError(f"mechanism.bias={bias!r} must be a finite number, or null for -log(max_context)")
        self.bias = -math.log(self.max_context) if bias is None else float(bias)

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        weights = torch.sigmoid(scores + self.bias)
        return weights if allowed is None else weights.masked_fill(~allowed, 0.0)

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        return torch.sigmoid(scores_of(q, k, scale, bias) + self.bias) * allowed  # each weight on its own

    def extra_repr(self) -> str:
        return f"sigmoid, bias={self.bias:.4g}"
