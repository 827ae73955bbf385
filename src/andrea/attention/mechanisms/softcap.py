"""softcap: softmax of soft-capped scores (Gemma 2, Gemma Team 2024; Grok-1).

    A = softmax(cap · tanh(s / cap))      s = q·k / sqrt(d) + bias; rows sum to 1
    out = A V

tanh keeps every score inside (-cap, cap) while leaving small ones almost as they are: a smooth
guard against logits that grow without bound. Gemma 2 caps attention scores at 50 (the default).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from andrea.attention.mechanisms.base import Mechanism, finite_number, scores_of, softmax_of
from andrea.attention.mechanisms.softmax import masked_softmax

MAX_CAP = 1e6  # a cap past any score a layer reaches caps nothing (Gemma 2: 50)


class Softcap(Mechanism):
    name = "softcap"
    kernel = "softcap"
    weights_meaning = "softmax weights of capped scores (each row sums to 1)"

    def __init__(self, *, cap: float = 50.0, **sizes: Any) -> None:
        super().__init__(**sizes)
        if not finite_number(cap) or not 0 < cap <= MAX_CAP:
            raise ValueError(f"mechanism.cap={cap!r} must be a finite number > 0 and <= {MAX_CAP:g}")
        self.cap = float(cap)

    def capped(self, scores: Tensor) -> Tensor:
        return self.cap * torch.tanh(scores / self.cap)

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        return masked_softmax(self.capped(scores), allowed, attends_self, inplace=True)

    def formula(self, q: Tensor, k: Tensor, allowed: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        return softmax_of(self.cap * torch.tanh(scores_of(q, k, scale, bias) / self.cap), allowed)

    def extra_repr(self) -> str:
        return f"softcap, cap={self.cap:g}"
