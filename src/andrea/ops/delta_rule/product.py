"""The delta product (Siems et al. 2025, "DeltaProduct"): n delta-rule steps a token, each with its own key,
value and β, under the token's one decay,

    S_{t,0} = α_t S_{t-1}, S_{t,j} = (I - β_{t,j} k_{t,j} k_{t,j}ᵀ) S_{t,j-1} + β_{t,j} k_{t,j} v_{t,j}ᵀ, S_t = S_{t,n}
    o_t = S_tᵀ (scale · q_t)

so a token's transition is a product of n Householder-like factors, not one: n = 1 is the delta rule. It is the
delta rule on T·n steps (fla-core's `naive_recurrent_gated_delta_product` lays k, v and β out so: (t, j) at row
t·n + j), reading q at each token's last step and decaying at its first, so every form of andrea.ops.delta_rule
computes it; k, v (B, H, T·n, K|V) and β (B, H, T·n) as laid out, q (B, H, T, K), g (B, H, T), `seg` (B, T).
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.delta_rule.implied import weights as step_weights


def steps(q: Tensor, g: Tensor | None, seg: Tensor | None, n: int) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """q, g and seg on the T·n steps: q zero before a token's last step, g zero after its first, each step in its
    token's document."""
    B, H, T, K = q.shape
    q_n = torch.cat((q.new_zeros(B, H, T, n - 1, K), q.unsqueeze(3)), dim=3).reshape(B, H, T * n, K)
    g_n = None if g is None else torch.cat((g.unsqueeze(3), g.new_zeros(B, H, T, n - 1)), dim=3).flatten(2)
    return q_n, g_n, None if seg is None else seg.repeat_interleave(n, dim=1)


def outputs(o: Tensor, n: int) -> Tensor:
    """The T·n steps' outputs (B, H, T·n, V) -> each token's, read at its last step: (B, H, T, V)."""
    return o[:, :, n - 1 :: n]


def weights(q: Tensor, k: Tensor, beta: Tensor, g: Tensor | None, scale: float, seg: Tensor | None, n: int) -> Tensor:
    """Each token's implied weights on the earlier tokens (B, H, T, T), each summed over the token's n writes:
    o_t = Σ_s Σ_j A[t, (s, j)] v_{s,j}, so with n > 1 a weight is a token's total share, its n values apart."""
    q_n, g_n, seg_n = steps(q, g, seg, n)
    A = outputs(step_weights(q_n, k, beta, g_n, scale, seg_n), n)  # (B, H, T, T·n)
    return A.unflatten(-1, (-1, n)).sum(-1)
