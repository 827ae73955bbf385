"""Linear attention whose state decays at a rate each head learns:

    S_t = γ_h S_{t-1} + k_t v_tᵀ,    o_t = S_tᵀ q_t / sqrt(K),    γ_h = sigmoid(w_h)

RetNet's retention with γ a parameter instead of 1 - 2^(-5-h) (w_h starts there). A mixer of the gated linear
family needs only what is its own: its decay, for andrea's LinearMixer, which brings the projections, the three
forms, the state cache for generation, the masks, the hook points and the implied weights for the maps; and the
recurrence above written on its own (`reference`), one token at a time, which andrea's conformance kit proves
every form against. A mixer of another family writes those itself (docs/write_a_mixer.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.linear_reference import recurrence
from andrea.ops.gated_linear import CHUNK


class LearnedDecay(LinearMixer):
    name = "learned_decay"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, form: str = "chunked", chunk: int = CHUNK,
    ) -> None:  # fmt: skip
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, form=form, chunk=chunk)
        gamma = 1 - 2.0 ** (-5.0 - torch.arange(n_head, dtype=torch.float32))  # RetNet's rates, to start from
        self.w = nn.Parameter(torch.log(gamma / (1 - gamma)))  # sigmoid(w) = γ

    def log_decay(self, x: Tensor) -> Tensor:
        """log γ_h for every token: (B, H, T), one decay per head."""
        B, T, _ = x.shape
        return F.logsigmoid(self.w).view(1, -1, 1).expand(B, -1, T)

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The recurrence above, one token at a time from γ_h = sigmoid(w_h); andrea's `recurrence` runs the state."""
        gamma = torch.sigmoid(self.w).view(1, -1, 1)  # (1, H, 1): one decay per head
        return recurrence(self, x, mask, lambda token, q, k: (q, k, gamma))
