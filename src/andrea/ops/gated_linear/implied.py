"""The weights gated linear attention implies (andrea.ops.gated_linear), a (T, T) matrix per head like
attention's: what the parallel and chunked forms multiply V by, and what the maps draw."""

from __future__ import annotations

from torch import Tensor

from andrea.ops.decayed import decayed
from andrea.ops.gated_linear.inputs import prepared


def weights(q: Tensor, k: Tensor, g: Tensor | None = None, scale: float = 1.0, seg: Tensor | None = None) -> Tensor:
    """The implied weights (B, H, T, T): A_ij = scale · Σ_c q_ic k_jc exp(G_ic - G_jc) for j <= i in i's
    document, else 0."""
    q, k, _, g = prepared(q, k, q, g)
    return implied(q, k, g.cumsum(dim=2), scale, seg)


def implied(q: Tensor, k: Tensor, G: Tensor, scale: float, seg: Tensor | None) -> Tensor:
    """`weights` from the cumulative log decay G (B, H, T, K|1), inputs already in the working dtype: the decayed
    scores of andrea.ops.decayed (sub-chunked for a decay per key channel)."""
    return decayed(q * scale, k, G, seg, 0)
