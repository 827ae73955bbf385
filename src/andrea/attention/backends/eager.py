"""eager: all heads at once, the (B, H, T, S) score tensor materialised.

One batched matmul for the scores, one masked softmax, one matmul with V.
What most model files do; the price is O(T·S) memory per head.
"""

from torch import Tensor

from andrea.attention.contract import (
    AttentionBackend,
    Capabilities,
    attention_weights,
    weighted_values,
)
from andrea.attention.masks import Mask
from andrea.attention.positions import ScoreMod


class EagerBackend(AttentionBackend):
    name = "eager"
    capabilities = Capabilities(native_weights=True, cpu_backward=True, native_gqa=True, score_mod=True)

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Mask | None,
        scale: float,
        need_weights: bool,
        score_mod: ScoreMod | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        weights = attention_weights(q, k, mask, scale, score_mod)  # (B, H, T, S)
        out = weighted_values(weights, v)  # (B, H, T, d)
        return out, weights if need_weights else None
