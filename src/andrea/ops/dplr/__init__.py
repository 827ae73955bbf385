"""The diagonal-plus-low-rank recurrence (RWKV-7's "generalized delta rule"; fla-core's
`generalized_delta_rule/dplr`): the state decays per key channel and is corrected along a vector read from itself,

    S_t = diag(exp(g_t)) S_{t-1} + b_t (a_tᵀ S_{t-1}) + k_t v_tᵀ      S (K, V) per head; g_t <= 0 per key channel
    o_t = S_tᵀ (scale · q_t)

so the transition is diag(w_t) + b_t a_tᵀ, and its low-rank part reads the state before the decay (RWKV-7: a_t =
-κ̂_t, b_t = κ̂_t ⊙ η_t, the delta rule's removal along a normalised key at an in-context rate η_t). The forms, one
file each (andrea.ops.delta_rule's shapes; a, b (B, H, T, K)):

    recurrent   token by token: the reference, and what generation runs
    chunked     chunks of C tokens, side by side: with u_t = a_tᵀ S_{t-1} and a'_t = a_t ⊙ exp(-g_t),
                (I - L) U = diag(exp G) A' S_0 + D₋(A', K) V,   L = D₋(A', B)     (a triangular solve)
                O = scale (diag(exp G) Q S_0 + D(Q, K) V + D(Q, B) U)
                S_C = exp(G_C) S_0 + (K ⊙ exp(G_C - G))ᵀ V + (B ⊙ exp(G_C - G))ᵀ U
                D the decayed scores (andrea.ops.decayed), D₋ strictly below the diagonal
    parallel    one chunk of T tokens: the implied weights scale (D(Q, K) + D(Q, B)(I - L)⁻¹ D₋(A', K)) times V

a' multiplies a by exp(-g_t): RWKV-7's log decay is at least -exp(-1/2), so the factor stays under 2. A log decay
below -MIN_LOG_DECAY a token, where that factor would pass e^20, is refused by the chunked and parallel forms in one
line (the recurrent form takes any).
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.dplr.chunk import chunked, parallel
from andrea.ops.dplr.implied import weights
from andrea.ops.dplr.naive import recurrent
from andrea.ops.sequence import CHUNK, FORMS

__all__ = ["CHUNK", "FORMS", "chunked", "parallel", "recurrent", "run", "weights"]


def run(
    form: str, q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, g: Tensor, scale: float,
    state: Tensor | None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The recurrence in the form named (one of FORMS), outside any autocast (float32 products and state)."""
    with torch.autocast(q.device.type, enabled=False):
        if form == "chunked":
            return chunked(q, k, v, a, b, g, scale, state, seg, chunk)
        return {"parallel": parallel, "recurrent": recurrent}[form](q, k, v, a, b, g, scale, state, seg)
