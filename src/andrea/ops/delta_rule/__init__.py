"""The delta rule, the recurrence under DeltaNet, Gated DeltaNet, Gated DeltaProduct and KDA (MIXERS.md): the
state is corrected toward each new value instead of added to,

    S_t = (I - β_t k_t k_tᵀ) diag(α_t) S_{t-1} + β_t k_t v_tᵀ   S (K, V) per head; β_t in (0, 1) (or (0, 2));
    o_t = S_tᵀ (scale · q_t)                                    α_t = exp(g_t) <= 1, one a head or a key channel
                                                                (DeltaNet: no decay, g = 0)

that is u_t = β_t (v_t - (diag(α_t) S_{t-1})ᵀ k_t), the part of v_t the state does not yet predict, and
S_t = diag(α_t) S_{t-1} + k_t u_tᵀ. In three forms that compute one function, one file each (andrea.ops.gated_linear's
shapes and conventions: q, k (B, H, T, K), v (B, H, T, V), β (B, H, T), g (B, H, T) or (B, H, T, K), the state
(B, H, K, V), `seg` packed documents; D(A, B) the decayed scores of andrea.ops.decayed, Σ_c a_ic b_jc
exp(G_ic - G_jc) for j at or before i, D₋ strictly before):

    recurrent   token by token: the reference, and what generation runs
    chunked     chunks of C tokens (the WY/UT form), side by side: inside one, with G the cumulative log decay
                from its start and L = diag(β) D₋(K, K),
                U = (I + L)⁻¹ diag(β) (V - (K ⊙ exp G) S_0)         (a triangular solve, no inverse formed)
                O = scale ((Q ⊙ exp G) S_0 + D(Q, K) U),  S_C = exp(G_C) S_0 + (K ⊙ exp(G_C - G))ᵀ U
    parallel    one chunk of T tokens: the implied weights A = scale D(Q, K)(I + L)⁻¹ diag(β) times V, signed
                (the maps say so; `weights`)

Decays stay in log space, and the working dtype is float32 at least, outside any autocast.
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.delta_rule.chunk import chunked, parallel
from andrea.ops.delta_rule.implied import weights
from andrea.ops.delta_rule.naive import recurrent
from andrea.ops.sequence import CHUNK, FORMS

__all__ = ["CHUNK", "FORMS", "chunked", "parallel", "recurrent", "run", "weights"]


def run(
    form: str, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None, scale: float,
    state: Tensor | None, seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The delta rule in the form named (one of FORMS), outside any autocast (float32 products and state)."""
    with torch.autocast(q.device.type, enabled=False):
        if form == "chunked":
            return chunked(q, k, v, beta, g, scale, state, seg, chunk)
        return {"parallel": parallel, "recurrent": recurrent}[form](q, k, v, beta, g, scale, state, seg)
