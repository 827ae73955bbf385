"""Gated linear attention, the recurrence under linear attention, retention, GLA and Mamba-2 (MIXERS.md):

    S_t = diag(exp(g_t)) S_{t-1} + k_t v_tᵀ        S (K, V) per head; g_t <= 0 the log decay, per key channel
    o_t = S_tᵀ (scale · q_t)                        (a scalar per head is the same decay on every channel)

in three forms that compute the same function (docs/spec.md), one file each:

    recurrent(q, k, v, g)   one token at a time from a fixed-size state: the reference, and what generation runs
    parallel(q, k, v, g)    the implied weights A_ij = Σ_c q_ic k_jc exp(G_ic - G_jc), j <= i (G = cumsum g),
                            times V: a (T, T) matrix per head (`weights`, the maps' weights)
    chunked(q, k, v, g)     the parallel form inside chunks of C tokens, the state carried across them:
                            O(T·C·K + T·K·V), linear in T

q, k (B, H, T, K), v (B, H, T, V), g (B, H, T, K) or (B, H, T) (one decay per head and token), the state
(B, H, K, V). Packed documents: `seg` (B, T) numbers each token's document from 0, the one the given state
belongs to; where it changes the state restarts from zero (S_{t-1} is dropped), so a document never reads
another's tokens (andrea.mixers.state_masks).

Decays stay in log space and their cumulative sums, like the state, are computed in float32 at least (float64
stays float64): a product of many decays is only formed as an exponent of a difference, at most 0, or at most
andrea.ops.decayed's SPAN about a reference token.
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.gated_linear.chunk import chunked, parallel
from andrea.ops.gated_linear.implied import weights
from andrea.ops.gated_linear.naive import recurrent
from andrea.ops.sequence import CHUNK, FORMS

__all__ = ["CHUNK", "FORMS", "chunked", "parallel", "recurrent", "run", "weights"]


def run(
    form: str, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, scale: float, state: Tensor | None,
    seg: Tensor | None = None, chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The recurrence in the form named (one of FORMS), chunks of `chunk` tokens for the chunked one; outside any
    autocast, so that under bfloat16 autocast the products, the cumulative decays and the state stay float32."""
    with torch.autocast(q.device.type, enabled=False):
        if form == "chunked":
            return chunked(q, k, v, g, scale, state, seg, chunk)
        return {"parallel": parallel, "recurrent": recurrent}[form](q, k, v, g, scale, state, seg)
