"""The weights the delta rule implies (andrea.ops.delta_rule), signed, a (T, T) matrix per head: the decay gaps
Γ and the unit lower triangular I + L its chunks solve with, and the whole matrix the maps draw."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.delta_rule.inputs import prepared


def gaps(G: Tensor, seg: Tensor | None, diagonal: int) -> Tensor:
    """exp(G_i - G_j) for key j at or before query i (diagonal 0) or strictly before (-1), in its document;
    else 0: (B, H, C, C)."""
    C = G.shape[2]
    unseen = torch.ones(C, C, dtype=torch.bool, device=G.device).triu(diagonal + 1)
    if seg is not None:
        unseen = unseen | (seg.unsqueeze(2) != seg.unsqueeze(1)).unsqueeze(1)
    return (G.unsqueeze(3) - G.unsqueeze(2)).masked_fill(unseen, float("-inf")).exp()


def unit_lower(k: Tensor, beta: Tensor, G: Tensor, seg: Tensor | None) -> Tensor:
    """I + L, L = strict_tril(diag(β) (K Kᵀ ⊙ Γ)): unit lower triangular, (B, H, C, C)."""
    L = beta.unsqueeze(-1) * (k @ k.transpose(-2, -1)) * gaps(G, seg, -1)
    return L + torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)


def weights(
    q: Tensor, k: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0, seg: Tensor | None = None
) -> Tensor:
    """The implied weights (B, H, T, T): scale tril(Q Kᵀ ⊙ Γ)(I + L)⁻¹ diag(β), signed."""
    q, k, _, beta, g = prepared(q, k, q, beta, g)
    G = g.cumsum(dim=2)
    lower = unit_lower(k, beta, G, seg)
    eye = torch.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device).expand_as(lower)
    inverse = torch.linalg.solve_triangular(lower, eye, upper=False, unitriangular=True)
    return scale * ((q @ k.transpose(-2, -1)) * gaps(G, seg, 0)) @ inverse * beta.unsqueeze(-2)
