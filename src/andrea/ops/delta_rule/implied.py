"""The weights the delta rule implies (andrea.ops.delta_rule), signed, a (T, T) matrix per head: the unit lower
triangular I + L its chunks solve with, and the whole matrix the maps draw. The decayed products are
andrea.ops.decayed's, a decay per head or per key channel alike."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.decayed import decayed
from andrea.ops.delta_rule.inputs import prepared


def unit_lower(k: Tensor, beta: Tensor, G: Tensor, seg: Tensor | None) -> Tensor:
    """I + L, L_ij = β_i Σ_c k_ic k_jc exp(G_ic - G_jc) for j before i: unit lower triangular, (B, H, C, C)."""
    L = beta.unsqueeze(-1) * decayed(k, k, G, seg, -1)
    return L + torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)


def weights(
    q: Tensor, k: Tensor, beta: Tensor, g: Tensor | None = None, scale: float = 1.0, seg: Tensor | None = None
) -> Tensor:
    """The implied weights (B, H, T, T): scale D(Q, K)(I + L)⁻¹ diag(β), signed, D the decayed scores."""
    q, k, _, beta, g = prepared(q, k, q, beta, g)
    G = g.cumsum(dim=2)
    lower = unit_lower(k, beta, G, seg)
    eye = torch.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device).expand_as(lower)
    inverse = torch.linalg.solve_triangular(lower, eye, upper=False, unitriangular=True)
    return scale * decayed(q, k, G, seg, 0) @ inverse * beta.unsqueeze(-2)
