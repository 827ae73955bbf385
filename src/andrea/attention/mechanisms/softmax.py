"""softmax: scaled dot-product attention (Vaswani et al., 2017, "Attention Is All You Need").

A = softmax(Q Kᵀ / sqrt(d) + bias, masked keys at -inf)     each row sums to 1
out = A V
"""

from __future__ import annotations

from torch import Tensor

from andrea.attention.contract import attention_weights, masked_softmax
from andrea.attention.masks import Mask
from andrea.attention.mechanisms.base import Mechanism
from andrea.attention.positions import ScoreMod


class Softmax(Mechanism):
    name = "softmax"

    def normalise(self, scores: Tensor, allowed: Tensor | None, attends_self: bool, head: int | None = None) -> Tensor:
        return masked_softmax(scores, allowed, attends_self, inplace=True)  # the scores are the caller's own

    def weights(self, q: Tensor, k: Tensor, mask: Mask | None, scale: float, score_mod: ScoreMod | None) -> Tensor:
        return attention_weights(q, k, mask, scale, score_mod)  # contract's: what the probe has always computed


SOFTMAX = Softmax(
    n_head=1, head_dim=1, d_model=1, max_context=1
)  # no parameters: the one a call without a mechanism uses
