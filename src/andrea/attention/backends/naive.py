"""naive: the math as the lesson writes it, one head at a time.

For every head h: scores = Q_h K_hᵀ · scale (+ a position bias such as ALiBi),
mask, then the mechanism's formula (softmax row-wise by default), times V_h.
It runs each mechanism's own `reference` (andrea.attention.mechanisms.base), so
it runs every mechanism. Slow on purpose; every other backend is tested against it.
"""

from typing import Any

from torch import Tensor

from andrea.attention.contract import AttentionBackend, Capabilities
from andrea.attention.masks import Mask
from andrea.attention.mechanisms import Mechanism
from andrea.attention.mechanisms.softmax import SOFTMAX
from andrea.attention.positions import ScoreMod


class NaiveBackend(AttentionBackend):
    name = "naive"
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
        out, weights = (mechanism or SOFTMAX).reference(q, k, v, mask, scale, score_mod)  # (B, H, T, d), (B, H, T, S)
        return out, weights if need_weights else None
