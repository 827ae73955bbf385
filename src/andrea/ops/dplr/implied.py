"""The weights the diagonal-plus-low-rank recurrence implies (andrea.ops.dplr), signed, a (T, T) matrix per head:
what the parallel form multiplies V by, and what the maps draw."""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.ops.decayed import decayed
from andrea.ops.dplr.inputs import checked_decay, prepared


def weights(
    q: Tensor, k: Tensor, a: Tensor, b: Tensor, g: Tensor, scale: float = 1.0, seg: Tensor | None = None
) -> Tensor:
    """The implied weights (B, H, T, T): scale (D(Q, K) + D(Q, B)(I - L)⁻¹ D₋(A', K)), L = D₋(A', B)."""
    q, k, _, a, b, g = prepared(q, k, q, a, b, g)
    G, a_before = checked_decay(g).cumsum(dim=2), a * (-g).exp()
    lower = torch.eye(q.shape[2], dtype=q.dtype, device=q.device) - decayed(a_before, b, G, seg, -1)
    reads = torch.linalg.solve_triangular(lower, decayed(a_before, k, G, seg, -1), upper=False, unitriangular=True)
    return scale * (decayed(q, k, G, seg, 0) + decayed(q, b, G, seg, 0) @ reads)
