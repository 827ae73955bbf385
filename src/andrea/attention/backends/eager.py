"""eager: all heads at once, the (B, H, T, S) score tensor materialised.

One batched matmul for the scores, the mechanism's weights (a masked softmax by
default) for all heads at once, one matmul with V. What most model files do; the
price is O(T·S) memory per head. It runs every mechanism, from its dense form.
"""

from typing import Any

from torch import Tensor

from andrea.attention.contract import AttentionBackend, Capabilities
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.mechanisms.softmax import SOFTMAX
from andrea.attention.positions import ScoreMod
from andrea.attention.shapes import weighted_values


class EagerBackend(AttentionBackend):
    name = "eager"
    capabilities = Capabilities(
        native_weights=True, cpu_backward=True, native_gqa=True, score_mod=True, kernels=None, distinct_value_dim=True
    )

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
        mechanism: Mechanism | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        weights = (mechanism or SOFTMAX).weights(q, k, mask, scale, score_mod)  # (B, H, T, S)
        out = weighted_values(weights, v)  # (B, H, T, d)
        return out, weights if need_weights else None
