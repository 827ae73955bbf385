"""eager: all heads at once, the (B, H, T, S) score tensor materialised.

One batched matmul for the scores, one masked softmax, one matmul with V.
What most model files do; the price is O(T·S) memory per head.
"""

from andrea.attention.contract import (
    AttentionBackend,
    Capabilities,
    attention_weights,
    weighted_values,
)


class EagerBackend(AttentionBackend):
    name = "eager"
    capabilities = Capabilities(native_weights=True, cpu_backward=True, native_gqa=True, score_mod=True)

    def forward(self, q, k, v, mask, scale, need_weights, score_mod=None):
        weights = attention_weights(q, k, mask, scale, score_mod)  # (B, H, T, S)
        out = weighted_values(weights, v)  # (B, H, T, d)
        return out, weights if need_weights else None
